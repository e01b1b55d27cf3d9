"""The naive engine: every operation runs at push, on the pushing thread (for debugging).

MXNet's ``NaiveEngine``: no worker threads and no queues, so a failing operation raises
at its push with the caller's stack intact. The implementation is compiled
(:mod:`mxkit.engine._naive`) to keep a push close to the cost of calling the function.
"""

from mxkit.core.errors import EngineError

try:
    from mxkit.engine._naive import NaiveEngine, NaiveVar
except ImportError as exc:  # a source checkout whose extensions were never built
    raise EngineError(
        f"the naive engine's compiled module mxkit.engine._naive is missing ({exc}); reinstall "
        f"mxkit-engine (uv sync, or pip install mxkit-engine) so that it is built"
    ) from exc

__all__ = ["NaiveEngine", "NaiveVar"]
