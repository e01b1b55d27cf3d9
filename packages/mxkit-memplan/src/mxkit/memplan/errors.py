"""The errors of mxkit-memplan.

Both derive from :class:`mxkit.core.errors.MXKitError` (so one ``except MXKitError``
catches every complaint of the framework) and from ``ValueError``, since each reports a
bad value handed in by the caller: a malformed graph description or an illegal plan.
"""

from __future__ import annotations

from mxkit.core.errors import MXKitError


class GraphError(MXKitError, ValueError):
    """A graph description is malformed: a cycle, an entry read before it is written,
    a negative size, an unknown entry name, a bad in-place option..."""


class PlanError(MXKitError, ValueError):
    """A memory plan is illegal for its graph (two live entries overlap, an in-place
    decision the graph does not allow, an external entry given storage), or a planner
    was called with options it does not know."""


__all__ = ["GraphError", "PlanError"]
