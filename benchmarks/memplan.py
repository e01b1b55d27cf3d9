"""Memory planning on synthetic graphs: bytes per strategy, ratio to the lower bound and to
MXNet 1.x's planner (the ``mxnet`` strategy), and planning time.

Run: ``python benchmarks/memplan.py`` (``--quick`` for the small graphs only,
``--verify`` to check every plan too). Anchors side by side on each row: the lower bound
(no plan in this order can use less), ``none`` (one buffer per entry) and ``mxnet``.
The table on real networks comes with the symbol package, which can export them.

The ``(bound)`` row's time is the analysis every strategy shares and a graph caches on
first use (lifetimes, the lower bound, per-step arrays); a strategy's first plan of a fresh
graph costs that plus its own row. The ``recorded`` column compares each plan's bytes with
those recorded before the planners were made faster
(``packages/mxkit-memplan/tests/fixtures/plan_fingerprints.json``): ``=`` is unchanged.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mxkit.memplan import plan_memory, synthetic
from mxkit.memplan.liveness import lifetimes, lower_bound
from mxkit.memplan.simulate import step_arrays

RECORDED = Path(__file__).resolve().parent.parent / "packages/mxkit-memplan/tests/fixtures/plan_fingerprints.json"

STRATEGIES = ("none", "inplace", "coshare", "mxnet", "greedy", "auto")


def graphs(quick: bool):
    """(name, factory) of the benchmark graphs, 1k to 100k nodes."""
    return synthetic.benchmark_suite(large=not quick)


def recorded_bytes(name: str, strategy: str, recorded: dict) -> int | None:
    return recorded.get(name, {}).get(strategy, [None])[0]


def mib(value: int) -> str:
    return f"{value / 2**20:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the graphs of about 1k nodes")
    parser.add_argument("--verify", action="store_true", help="verify every plan (slower)")
    parser.add_argument("--repeats", type=int, default=3, help="plan each graph this many times, keep the best")
    args = parser.parse_args()
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    header = (f"{'graph':<22} {'nodes':>7} {'strategy':<8} {'MiB':>12} {'x lower':>8} {'x none':>7} "
              f"{'x mxnet':>8} {'ms':>9} {'recorded':>8}")
    print(header)
    print("-" * len(header))
    for name, make in graphs(args.quick):
        graph = make()
        started = time.perf_counter()
        lifetimes(graph)
        _profile, bound = lower_bound(graph)
        step_arrays(graph)
        bound_ms = (time.perf_counter() - started) * 1e3
        plans, best_ms = {}, {}
        for _ in range(max(args.repeats, 1)):
            for strategy in STRATEGIES:
                plans[strategy] = plan_memory(graph, strategy)
                seconds = plans[strategy].planning_seconds
                best_ms[strategy] = min(best_ms.get(strategy, float("inf")), seconds * 1e3)
        if args.verify:
            for plan in plans.values():
                plan.verify(graph)
        none, mxnet = plans["none"].total_bytes, plans["mxnet"].total_bytes
        print(f"{name:<22} {graph.num_steps:>7} {'(bound)':<8} {mib(bound):>12} {1:>8.3f} "
              f"{bound / none if none else 0:>7.3f} {bound / mxnet if mxnet else 0:>8.3f} {bound_ms:>9.1f}")
        for strategy, plan in plans.items():
            total = plan.total_bytes
            chosen = f" ({plan.details['chosen']})" if strategy == "auto" else ""
            before = recorded_bytes(name, strategy, recorded)
            same = "" if before is None else "=" if before == total else f"was {mib(before)}"
            print(f"{'':<22} {'':>7} {strategy:<8} {mib(total):>12} {plan.ratio_to_lower_bound:>8.3f} "
                  f"{total / none if none else 0:>7.3f} {total / mxnet if mxnet else 0:>8.3f} "
                  f"{best_ms[strategy]:>9.1f} {same:>8}{chosen}")


if __name__ == "__main__":
    main()
