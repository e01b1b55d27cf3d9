"""The naive engine: every operation runs at push, on the pushing thread (for debugging).

MXNet's ``NaiveEngine``: no worker threads and no queues, so a failing operation raises
at its push with the caller's stack intact. The implementation is compiled
(:mod:`mxkit.engine._naive`) to keep a push close to the cost of calling the function.
"""

from mxkit.engine._naive import NaiveEngine, NaiveVar

__all__ = ["NaiveEngine", "NaiveVar"]
