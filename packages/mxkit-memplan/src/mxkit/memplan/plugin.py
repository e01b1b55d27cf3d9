"""The built-in memory planners, registered through the ``mxkit_memory_planners`` hook.

Listed in ``mxkit.core.plugins.BUILTIN_PLUGIN_MODULES``; the strategies themselves are
imported on the first call, so building the plugin registry stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import PlannerSpec

_DESCRIPTIONS = {
    "none": "one buffer per entry, no sharing (the baseline)",
    "inplace": "in-place at the last read plus best-fit recycling of freed buffers (MXNet paper)",
    "coshare": "share only along longest-path colours, so no parallelism is lost (MXNet paper)",
    "mxnet": "MXNet 1.x default: same-size in-place plus a 16x size-window free list that grows blocks",
    "greedy": "in-place chains, then offset best fit, largest first, in one arena per device",
    "auto": "run inplace, mxnet and greedy and keep the smallest plan",
}


def _lazy(name: str) -> Callable[..., Any]:
    def planner(graph: Any, **options: Any) -> Any:
        from mxkit.memplan.strategies import STRATEGIES

        return STRATEGIES[name](graph, **options)

    planner.__name__ = f"plan_{name}"
    planner.__doc__ = f"The {name!r} memory planner: {_DESCRIPTIONS[name]}."
    return planner


def plan_sublinear(graph: Any, **options: Any) -> Any:
    """The 'sublinear' memory planner (see :mod:`mxkit.memplan.sublinear`)."""
    from mxkit.memplan.sublinear import plan_sublinear as plan

    return plan(graph, **options)


def _select_checkpoints(candidates: Any, policy: str = "sqrt", segment_bytes: float = 0.0) -> frozenset[str]:
    from mxkit.memplan.sublinear import select_checkpoints

    return select_checkpoints(candidates, policy, segment_bytes)


_SUBLINEAR_DESCRIPTION = "Chen et al. 2016: keep ~sqrt(n) forward results, recompute the rest in backward; then auto"


@hookimpl(tryfirst=True)
def mxkit_memory_planners() -> Iterator[PlannerSpec]:
    """Yield the built-in strategies: none, inplace, coshare, mxnet, greedy, auto, sublinear."""
    for name, description in _DESCRIPTIONS.items():
        yield PlannerSpec(name=name, planner=_lazy(name), description=description)
    # a recomputing planner: clients rewrite the graph with its checkpoint selection first
    yield PlannerSpec(name="sublinear", planner=plan_sublinear, description=_SUBLINEAR_DESCRIPTION,
                      select_checkpoints=_select_checkpoints)
