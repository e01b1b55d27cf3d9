"""mxkit-memplan: static memory planning for any dataflow graph described in plain Python.

Describe the graph with :class:`Entry` and :class:`Node` (or :class:`GraphBuilder`), then
``plan_memory(graph, strategy)`` returns a :class:`MemoryPlan`: a pool and offset per
entry, the pools, ``total_bytes``, the live-bytes profile and the lower bound.
``plan.verify(graph)`` checks it and ``plan.report()`` renders it. Strategies are plugins
(``none``, ``inplace``, ``coshare``, ``mxnet``, ``greedy``, ``auto``, and ``sublinear``, which
chooses forward results to recompute for a client that rewrites its graph: see
:mod:`mxkit.memplan.sublinear`); the default comes from
the configuration key ``memplan``. Only the standard library and mxkit-core are needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.specs import PlannerSpec
from mxkit.memplan.builder import GraphBuilder
from mxkit.memplan.errors import GraphError, PlanError
from mxkit.memplan.graph import Entry, Graph, InplaceOption, Node
from mxkit.memplan.plan import MemoryPlan, Pool, Storage, format_comparison
from mxkit.memplan.sublinear import RecomputeCandidate, recompute_selector, select_checkpoints


def plan_memory(graph: Graph, strategy: str | PlannerSpec | None = None, **options: Any) -> MemoryPlan:
    """Plan the memory of ``graph`` with a strategy chosen by name.

    Parameters
    ----------
    graph : Graph
        The graph description.
    strategy : str or PlannerSpec, optional
        A planner name registered through ``mxkit_memory_planners`` (``None``: the
        configuration key ``memplan``, ``MXKIT_MEMPLAN``, default ``"auto"``), or a planner
        already resolved (``mxkit.core.plugins.get_planner``), used as it is.
    **options
        Passed to the planner (e.g. ``max_colours`` for ``coshare``).

    Returns
    -------
    MemoryPlan

    Raises
    ------
    mxkit.core.errors.UnknownPluginError
        No planner has that name (the message lists the available ones).
    GraphError, PlanError
        A malformed graph, or options the planner does not accept.
    """
    from mxkit.core.errors import PluginError
    from mxkit.core.plugins import get_planner

    if not isinstance(graph, Graph):
        raise GraphError(
            f"plan_memory needs a mxkit.memplan.Graph, got {type(graph).__name__}; "
            f"build one with Graph(nodes, entries) or GraphBuilder"
        )
    spec = strategy if isinstance(strategy, PlannerSpec) else get_planner(strategy)
    planner: Callable[..., Any] = spec.planner  # type: ignore[assignment]  # a PlannerSpec checks callable
    plan = planner(graph, **options)
    if not isinstance(plan, MemoryPlan):
        raise PluginError(
            f"memory planner {spec.name!r} returned {type(plan).__name__}, not a mxkit.memplan.MemoryPlan"
        )
    return plan


__all__ = [
    "Entry",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "InplaceOption",
    "MemoryPlan",
    "Node",
    "PlanError",
    "RecomputeCandidate",
    "Pool",
    "Storage",
    "format_comparison",
    "plan_memory",
    "recompute_selector",
    "select_checkpoints",
]
