"""The result of planning: where every entry lives, and what that costs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mxkit.memplan.graph import Graph


@dataclass(frozen=True)
class Storage:
    """Where one entry lives: ``size`` bytes at byte ``offset`` of pool ``pool``."""

    pool: int
    offset: int


@dataclass(frozen=True)
class Pool:
    """One block of memory the executor allocates: ``size`` bytes on ``device``."""

    id: int
    device: str
    size: int


@dataclass(frozen=True)
class MemoryPlan:
    """A storage assignment for every planned (non-external) entry of a graph.

    Attributes
    ----------
    strategy : str
        Name of the strategy that made it.
    storage : dict of str to Storage
        Entry name to its pool and byte offset; external entries have none.
    pools : tuple of Pool
        The blocks to allocate; ``total_bytes`` is the sum of their sizes.
    inplace : dict of str to (str, bool)
        Output entry name to ``(input entry name, identity)`` for every output that was
        placed in an input's memory through an in-place option.
    live_bytes : tuple of int
        Per step, the bytes that must be distinct during that step (given the order).
    lower_bound_bytes : int
        No plan of this graph in this order can use fewer bytes (see
        :mod:`mxkit.memplan.liveness`).
    planning_seconds : float
        Wall time the strategy took.
    recompute : tuple of str
        Names of nodes the executor should run again instead of keeping their outputs
        (for recomputation strategies; empty for the strategies of this package).
    details : dict
        Strategy-specific facts (the colours of ``coshare``, the candidates of ``auto``).
    """

    strategy: str
    storage: Mapping[str, Storage]
    pools: tuple[Pool, ...]
    inplace: Mapping[str, tuple[str, bool]]
    live_bytes: tuple[int, ...]
    lower_bound_bytes: int
    planning_seconds: float = 0.0
    recompute: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """Bytes of all pools together."""
        return sum(pool.size for pool in self.pools)

    def bytes_by_device(self) -> dict[str, int]:
        """Pool bytes per device."""
        totals: dict[str, int] = {}
        for pool in self.pools:
            totals[pool.device] = totals.get(pool.device, 0) + pool.size
        return totals

    @property
    def ratio_to_lower_bound(self) -> float:
        """``total_bytes / lower_bound_bytes`` (1.0 is optimal for this order)."""
        if self.lower_bound_bytes == 0:
            return 1.0 if self.total_bytes == 0 else float("inf")
        return self.total_bytes / self.lower_bound_bytes

    def verify(self, graph: Graph) -> None:
        """Check that this plan is legal for ``graph``.

        No two entries live during one step overlap in memory unless an in-place
        decision allows it, every in-place decision is one of the graph's options and
        legal at that step, every planned entry fits its pool on its device, and
        external entries have no storage.

        Raises
        ------
        PlanError
            Naming the first violation found.
        """
        from mxkit.memplan.verify import verify_plan

        verify_plan(self, graph)

    def report(self, max_pools: int = 20) -> str:
        """A table of the plan: totals, the lower bound, and the largest pools."""
        lines = [format_comparison([self]), ""]
        entries_in: dict[int, int] = {}
        for storage in self.storage.values():
            entries_in[storage.pool] = entries_in.get(storage.pool, 0) + 1
        biggest = sorted(self.pools, key=lambda p: (-p.size, p.id))[:max_pools]
        lines.append(f"{'pool':>6}  {'device':<10} {'bytes':>14}  {'entries':>7}")
        for pool in biggest:
            lines.append(f"{pool.id:>6}  {pool.device:<10} {pool.size:>14,}  {entries_in.get(pool.id, 0):>7}")
        if len(self.pools) > len(biggest):
            rest = self.pools_bytes_excluding(p.id for p in biggest)
            lines.append(f"{'...':>6}  {len(self.pools) - len(biggest)} more pools, {rest:,} bytes")
        return "\n".join(lines)

    def plot(self, graph: Graph | None = None, ax: Any = None, compare: Any = None) -> Any:
        """Draw live bytes over the execution steps with this plan's arena size as a line.

        Needs matplotlib (``pip install 'mxkit-memplan[plot]'``); draws with the Agg backend.

        Parameters
        ----------
        graph : Graph, optional
            The graph this plan was made for: its node names label the steps and the peak.
        ax : matplotlib Axes, optional
            Draw into these axes; default a new figure's (``ax.figure.savefig("plan.png")``).
        compare : MemoryPlan or list of MemoryPlan, optional
            Other plans of the same graph (other strategies), each drawn as its own line.

        Returns
        -------
        matplotlib.axes.Axes

        Raises
        ------
        mxkit.core.errors.MissingComponentError
            When matplotlib is not installed.
        PlanError
            When ``graph`` is not this plan's graph or ``compare`` holds a non-plan.
        """
        from mxkit.memplan.picture import draw_memory_picture, memory_picture

        picture = memory_picture(self, graph=graph, compare=compare)
        return draw_memory_picture(picture, ax=ax)

    def pools_bytes_excluding(self, pool_ids: Iterable[int]) -> int:
        """Bytes of the pools not in ``pool_ids``."""
        skip = set(pool_ids)
        return sum(p.size for p in self.pools if p.id not in skip)


def human_bytes(value: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns


def format_comparison(plans: Iterable[MemoryPlan]) -> str:
    """One row per plan: bytes, ratio to the lower bound, pools, in-place count, time."""
    header = (f"{'strategy':<10} {'total':>12} {'lower bound':>12} {'ratio':>7} {'pools':>7} "
              f"{'in-place':>8} {'time (ms)':>10}")
    lines = [header, "-" * len(header)]
    for plan in plans:
        lines.append(
            f"{plan.strategy:<10} {human_bytes(plan.total_bytes):>12} {human_bytes(plan.lower_bound_bytes):>12} "
            f"{plan.ratio_to_lower_bound:>7.3f} {len(plan.pools):>7} {len(plan.inplace):>8} "
            f"{plan.planning_seconds * 1e3:>10.2f}"
        )
    return "\n".join(lines)


__all__ = ["MemoryPlan", "Pool", "Storage", "format_comparison", "human_bytes"]
