"""The ``sublinear`` strategy: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost".

Training keeps every forward result alive until the backward pass reads it, so memory
grows with depth. Chen's idea is to keep only some forward results (the *checkpoints*)
and recompute the others during backward, one segment at a time: with about sqrt(n)
segments of about sqrt(n) nodes, memory falls from O(n) to O(sqrt(n)) forward results
for one extra forward computation.

Recomputation changes the graph (copies of forward nodes run in backward), and this
package knows nothing of operators, so the work is split:

1. :func:`select_checkpoints` (here, graph-agnostic) chooses which forward nodes keep
   their results, from a plain list of :class:`RecomputeCandidate` in forward order;
2. the client that owns the operators rewrites its graph so that backward recomputes
   every other node (mxkit-symbol's ``mirror`` pass does this for the executor);
3. :func:`plan_sublinear` plans the rewritten graph with the best ordinary strategy
   (``auto`` by default) and records which nodes recompute (``MemoryPlan.recompute``).

A client learns that a planner wants step 2 from its :class:`~mxkit.core.specs.PlannerSpec`
(or :func:`recompute_selector`): a spec with ``select_checkpoints`` set is a recomputation strategy, whatever its
name, so a third-party plugin can bring its own selection.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mxkit.core.specs import PlannerSpec
from mxkit.memplan.errors import PlanError
from mxkit.memplan.graph import Graph
from mxkit.memplan.plan import MemoryPlan

POLICIES = ("sqrt", "cheap")


@dataclass(frozen=True)
class RecomputeCandidate:
    """One forward node, as checkpoint selection sees it.

    Parameters
    ----------
    name : str
        The node's name (returned among the checkpoints when it is kept).
    size : int
        Bytes of its outputs.
    inputs : tuple of str
        Names of the earlier candidates whose outputs it reads. Selection keeps only
        nodes that *cut* the forward graph (no earlier result is read past them), so
        that recomputing one segment never needs another; with no inputs given, every
        node is a cut (a chain).
    recomputable : bool
        False when running it again would not give the same result (a random operator
        such as Dropout) or when its results must stay anyway (an output the caller
        keeps): such a node is always a checkpoint.
    forced : bool or None
        The user's choice (MXNet's ``__force_mirroring__`` attribute): True recomputes
        it, False keeps it, None leaves it to the policy.
    expensive : bool
        Whether recomputing it costs much (a convolution, a matrix product): the
        ``cheap`` policy keeps exactly these.
    """

    name: str
    size: int
    inputs: tuple[str, ...] = ()
    recomputable: bool = True
    forced: bool | None = None
    expensive: bool = False


def cut_points(candidates: Sequence[RecomputeCandidate]) -> list[bool]:
    """Per candidate, whether no result of an earlier candidate is read after it.

    Keeping such a node's results makes it a complete boundary: the nodes after it up to
    the next kept cut can be recomputed from it (and from results that are kept anyway).
    """
    position = {c.name: i for i, c in enumerate(candidates)}
    last_read = list(range(len(candidates)))
    for i, candidate in enumerate(candidates):
        for name in candidate.inputs:
            j = position.get(name)
            if j is not None and j < i:
                last_read[j] = max(last_read[j], i)
    cuts = []
    reach = -1   # the furthest position that reads a result made before the current one
    for i in range(len(candidates)):
        cuts.append(reach <= i)
        reach = max(reach, last_read[i])
    return cuts


def _segment(candidates: Sequence[RecomputeCandidate], cuts: Sequence[bool], policy: str,
             budget: float) -> tuple[set[str], int]:
    """The checkpoints for one segment budget, and Chen's cost estimate: the bytes kept plus
    the largest segment recomputed at once."""
    kept: set[str] = set()
    saved = largest = 0
    accumulated = 0
    for candidate, cut in zip(candidates, cuts):
        if not candidate.recomputable or candidate.forced is False:
            kept.add(candidate.name)
            saved += candidate.size
            largest = max(largest, accumulated)
            accumulated = 0
            continue
        if candidate.forced:
            accumulated += candidate.size
            continue
        if policy == "cheap":
            if candidate.expensive:
                kept.add(candidate.name)
                saved += candidate.size
            continue
        accumulated += candidate.size
        if accumulated > budget and cut:
            kept.add(candidate.name)
            saved += candidate.size
            largest = max(largest, accumulated - candidate.size)
            accumulated = 0
    return kept, saved + max(largest, accumulated)


SEARCH_BUDGETS = 48


def select_checkpoints(candidates: Sequence[RecomputeCandidate], policy: str = "sqrt",
                       segment_bytes: float = 0.0) -> frozenset[str]:
    """Names of the forward nodes whose results stay alive for backward; the rest are recomputed.

    Parameters
    ----------
    candidates : sequence of RecomputeCandidate
        The forward nodes in execution order.
    policy : {"sqrt", "cheap"}
        ``sqrt``: Chen's greedy segmentation. Walking forward, results accumulate into the
        current segment until their bytes pass ``segment_bytes``; the next node that cuts
        the graph (see :func:`cut_points`) ends the segment and is kept. ``cheap``: MXNet's
        ``MXNET_BACKWARD_DO_MIRROR`` policy, keep the expensive nodes and recompute every
        cheap one.
    segment_bytes : float
        The ``sqrt`` budget per segment. 0 searches for it as Chen's ``search_plan`` does:
        budgets from the largest single result to the total (total / sqrt(n) among them)
        are tried and the one with the smallest estimate, bytes kept plus the largest
        segment, wins.

    Returns
    -------
    frozenset of str
        The checkpoints. A node that is not recomputable, or forced False, is always
        among them (and starts a new segment); one forced True never is.

    Raises
    ------
    PlanError
        For an unknown policy or a negative budget.
    """
    if policy not in POLICIES:
        raise PlanError(f"checkpoint policy {policy!r} is not one of {', '.join(POLICIES)}")
    if isinstance(segment_bytes, bool) or not isinstance(segment_bytes, int | float) or segment_bytes < 0:
        raise PlanError(f"segment_bytes must be a byte count >= 0 (0: search), got {segment_bytes!r}")
    cuts = cut_points(candidates)
    if policy == "cheap" or segment_bytes:
        return frozenset(_segment(candidates, cuts, policy, segment_bytes)[0])
    total = sum(c.size for c in candidates)
    smallest = max((c.size for c in candidates), default=0)
    budgets = {total / max(1.0, math.sqrt(len(candidates)))}
    if 0 < smallest < total:
        ratio = (total / smallest) ** (1 / SEARCH_BUDGETS)
        budgets.update(smallest * ratio ** k for k in range(SEARCH_BUDGETS + 1))
    best = min((_segment(candidates, cuts, policy, budget) for budget in sorted(budgets)), key=lambda r: r[1],
               default=(set(), 0))
    return frozenset(best[0])


BASE_STRATEGY = "auto"


def plan_sublinear(graph: Graph, recompute: Iterable[str] = (), base: str = BASE_STRATEGY,
                   **options: Any) -> MemoryPlan:
    """Plan a graph already rewritten for recomputation with the ordinary strategy ``base``.

    Parameters
    ----------
    graph : Graph
        The rewritten graph (recomputing nodes included, in the order they run).
    recompute : iterable of str
        Names of the graph's nodes that recompute forward results (reported as
        ``MemoryPlan.recompute``); each must be a node of ``graph``.
    base : str
        The strategy that places the entries (any registered planner but a recomputing
        one; default ``auto``, the smallest of ``inplace``, ``mxnet`` and ``greedy``).
    **options
        Passed to ``base``.

    Raises
    ------
    PlanError
        For a ``recompute`` name that is no node of the graph, or a recomputing ``base``.
    """
    from mxkit.core.plugins import get_planner
    from mxkit.memplan import plan_memory
    from mxkit.memplan.strategies import _check_graph

    started = time.perf_counter()
    graph = _check_graph(graph, "sublinear")
    names = (recompute,) if isinstance(recompute, str) else tuple(recompute)
    known = {node.name for node in graph.nodes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PlanError(f"sublinear planner: recompute names {unknown[:5]} are not nodes of the graph; give the "
                        f"names of the nodes that recompute forward results")
    if get_planner(base).select_checkpoints is not None:
        raise PlanError(f"sublinear planner: base {base!r} is itself a recomputing strategy; use an ordinary one "
                        f"such as auto, greedy or mxnet")
    plan = plan_memory(graph, base, **options)
    details = {"base": plan.strategy, "recomputed_nodes": len(names), **plan.details}
    return replace(plan, strategy="sublinear", recompute=names, details=details,
                   planning_seconds=time.perf_counter() - started)


def recompute_selector(planner: PlannerSpec | str | None) -> Callable[..., frozenset[str]] | None:
    """The checkpoint selection of a recomputing planner, or None for an ordinary one.

    Parameters
    ----------
    planner : PlannerSpec, str or None
        A resolved planner, or a planner name (None: config ``memplan``).

    Returns
    -------
    callable or None
        ``select_checkpoints(candidates, policy, segment_bytes) -> frozenset of names``
        (see :func:`select_checkpoints`) when the planner expects its client to rewrite
        the graph for recomputation before planning, else None.
    """
    if planner is None or isinstance(planner, str):
        from mxkit.core.plugins import get_planner

        planner = get_planner(planner)
    return planner.select_checkpoints


__all__ = ["BASE_STRATEGY", "POLICIES", "RecomputeCandidate", "plan_sublinear", "recompute_selector",
           "select_checkpoints"]
