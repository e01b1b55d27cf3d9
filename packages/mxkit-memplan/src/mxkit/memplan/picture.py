"""A picture of a memory plan: live bytes over the execution steps, each strategy's arena against it.

The figure the MXNet paper used to explain memory planning: the curve is what must be
distinct at each step in this order (:attr:`MemoryPlan.live_bytes`, whose peak is the lower
bound), and a horizontal line per plan is the memory that plan allocates. The gap between a
line and the curve's peak is what the strategy leaves on the table.

:func:`memory_picture` computes the numbers (pure, testable); :func:`draw_memory_picture`
draws them with matplotlib, an optional dependency (``pip install 'mxkit-memplan[plot]'``)
imported only when a picture is drawn, always with the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mxkit.core.plotting import matplotlib_figure
from mxkit.memplan.errors import PlanError
from mxkit.memplan.graph import Graph
from mxkit.memplan.plan import MemoryPlan

# more step names than this and the x axis shows step numbers only
_MAX_NAMED_STEPS = 40
_UNITS = (("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3))


@dataclass(frozen=True)
class Arena:
    """One plan's allocation: a horizontal line at ``total_bytes``."""

    strategy: str
    total_bytes: int
    ratio_to_lower_bound: float


@dataclass(frozen=True)
class MemoryPicture:
    """The data of a memory-plan picture, in bytes.

    Attributes
    ----------
    steps : tuple of int
        ``0 .. n-1``, one per executed node.
    live_bytes : tuple of int
        The first plan's live bytes per step (the curve).
    lower_bound_bytes : int
        The first plan's lower bound (the curve's peak on a single device).
    arenas : tuple of Arena
        The first plan, then each compared plan, in the order given.
    other_curves : tuple of (str, tuple of int)
        Live bytes of compared plans whose graph differs (a recomputing strategy executes
        more steps), by strategy; their curve is drawn too so that their line has its own
        reference.
    step_names : tuple of str
        Node names per step when a graph was given, else empty.
    """

    steps: tuple[int, ...]
    live_bytes: tuple[int, ...]
    lower_bound_bytes: int
    arenas: tuple[Arena, ...]
    other_curves: tuple[tuple[str, tuple[int, ...]], ...] = ()
    step_names: tuple[str, ...] = ()

    @property
    def peak_step(self) -> int:
        """The first step at which the live bytes peak (-1 for an empty graph)."""
        if not self.live_bytes:
            return -1
        return self.live_bytes.index(max(self.live_bytes))


def _compared_plans(compare: Any) -> list[MemoryPlan]:
    if compare is None:
        return []
    plans = [compare] if isinstance(compare, MemoryPlan) else list(compare) if isinstance(compare, Iterable) else None
    if plans is None or not all(isinstance(p, MemoryPlan) for p in plans):
        raise PlanError(
            f"compare= takes a MemoryPlan or a list of MemoryPlans (e.g. plans of other strategies of the "
            f"same graph), got {compare!r:.120}"
        )
    return plans


def memory_picture(plan: MemoryPlan, graph: Graph | None = None, compare: Any = None) -> MemoryPicture:
    """The numbers :meth:`MemoryPlan.plot` draws.

    Parameters
    ----------
    plan : MemoryPlan
        Its live bytes are the curve; its arena is the first line.
    graph : Graph, optional
        The graph it plans; names the steps (its nodes) and must have one node per step.
    compare : MemoryPlan or iterable of MemoryPlan, optional
        More plans to draw as lines (other strategies of the same graph).

    Raises
    ------
    PlanError
        When ``graph`` has a different number of steps than the plan, or ``compare`` holds
        something other than plans.
    """
    if not isinstance(plan, MemoryPlan):
        raise PlanError(f"memory_picture needs a MemoryPlan, got {type(plan).__name__}")
    names: tuple[str, ...] = ()
    if graph is not None:
        if not isinstance(graph, Graph):
            raise PlanError(f"graph= must be the mxkit.memplan.Graph the plan was made for, got "
                            f"{type(graph).__name__}")
        if graph.num_steps != len(plan.live_bytes):
            raise PlanError(
                f"graph= has {graph.num_steps} nodes but plan {plan.strategy!r} covers {len(plan.live_bytes)} "
                f"steps; pass the graph this plan was made for"
            )
        names = tuple(node.name for node in graph.nodes)
    others = _compared_plans(compare)
    # one lower bound for every arena: the first plan's (a recomputing plan's own bound is of a
    # longer graph, and a legend with two bounds contradicts itself)
    bound = max(plan.lower_bound_bytes, 1)
    arenas = tuple(Arena(p.strategy, p.total_bytes, p.total_bytes / bound) for p in [plan, *others])
    curves = tuple((p.strategy, tuple(p.live_bytes)) for p in others if tuple(p.live_bytes) != tuple(plan.live_bytes))
    return MemoryPicture(steps=tuple(range(len(plan.live_bytes))), live_bytes=tuple(plan.live_bytes),
                         lower_bound_bytes=plan.lower_bound_bytes, arenas=arenas, other_curves=curves,
                         step_names=names)


def byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit to show values up to ``largest`` bytes in: ``("MiB", 1048576)``."""
    chosen = _UNITS[0]
    for unit in _UNITS:
        if largest >= unit[1]:
            chosen = unit
    return chosen


def draw_memory_picture(picture: MemoryPicture, ax: Any = None) -> Any:
    """Draw ``picture`` into ``ax`` (a new Agg figure's axes when None) and return the axes."""
    if ax is None:
        ax = matplotlib_figure("MemoryPlan.plot", extra="mxkit-memplan[plot]").add_subplot()
    everything = [*picture.live_bytes, *(a.total_bytes for a in picture.arenas)]
    for _, curve in picture.other_curves:
        everything.extend(curve)
    unit, scale = byte_unit(max(everything, default=0))
    live = [b / scale for b in picture.live_bytes]
    ax.fill_between(picture.steps, live, step="mid", alpha=0.25, color="tab:blue", linewidth=0)
    ax.step(picture.steps, live, where="mid", color="tab:blue", linewidth=1.2,
            label=f"live bytes (lower bound {picture.lower_bound_bytes / scale:,.1f} {unit})")
    colours = ["tab:red", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
               "tab:cyan", "tab:gray"]
    colour_of = {}
    for index, arena in enumerate(picture.arenas):
        colour = colours[index % len(colours)]
        colour_of[arena.strategy] = colour
        # dashes of one period at shifted offsets: arenas of equal size (none and a plugin's
        # copy of it, say) interleave their colours instead of the later hiding the earlier
        ax.axhline(arena.total_bytes / scale, color=colour, linestyle=(2 * index % 8, (4, 4)), linewidth=1.4,
                   label=f"{arena.strategy}: {arena.total_bytes / scale:,.1f} {unit} "
                         f"({arena.ratio_to_lower_bound:.2f}x bound)")
    for strategy, curve in picture.other_curves:
        ax.step(range(len(curve)), [b / scale for b in curve], where="mid", linewidth=0.9, alpha=0.8,
                color=colour_of.get(strategy, "black"), label=f"live bytes with {strategy}'s graph")
    if picture.peak_step >= 0:
        peak = picture.peak_step
        name = f" ({_short(picture.step_names[peak], 48)})" if picture.step_names else ""
        ax.annotate(f"peak at step {peak}{name}", xy=(peak, live[peak]), xytext=(0, 8),
                    textcoords="offset points", ha="center", fontsize=8)
    if picture.step_names and len(picture.step_names) <= _MAX_NAMED_STEPS:
        ax.set_xticks(list(picture.steps))
        ax.set_xticklabels([_short(name) for name in picture.step_names], rotation=90, fontsize=7)
    ax.set_xlabel("execution step")
    ax.set_ylabel(f"memory ({unit})")
    ax.set_ylim(0, max(everything, default=0) / scale * 1.12 or 1)  # room for the peak's note
    ax.set_xlim(-0.5, max(len(picture.steps), *(len(c) for _, c in picture.other_curves), 1) - 0.5)
    # beside the axes, not over them: a legend inside covers the curve or the arenas' lines
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)
    return ax


def _short(name: str, limit: int = 24) -> str:
    """``name`` cut to ``limit`` characters (the middle elided), so labels leave room for the plot."""
    if len(name) <= limit:
        return name
    keep = limit - 1
    return name[: keep - keep // 2] + "\N{HORIZONTAL ELLIPSIS}" + name[len(name) - keep // 2:]


__all__ = ["Arena", "MemoryPicture", "byte_unit", "draw_memory_picture", "memory_picture"]
