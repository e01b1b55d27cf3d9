"""Memory planning on synthetic graphs: bytes per strategy, ratio to the lower bound and to
MXNet 1.x's planner (the ``mxnet`` strategy), and planning time.

Run: ``python benchmarks/memplan.py`` (``--quick`` for the small graphs only,
``--verify`` to check every plan too). Anchors side by side on each row: the lower bound
(no plan in this order can use less), ``none`` (one buffer per entry) and ``mxnet``.
The table on real networks comes with the symbol package, which can export them.
"""

from __future__ import annotations

import argparse
import time

from mxkit.memplan import plan_memory, synthetic
from mxkit.memplan.liveness import lifetimes, lower_bound

STRATEGIES = ("none", "inplace", "coshare", "mxnet", "greedy", "auto")


def graphs(quick: bool):
    """(name, factory) of the benchmark graphs, 1k to 100k nodes."""
    small = [
        ("chain 1k", lambda: synthetic.chain(1_000)),
        ("residual 1k", lambda: synthetic.residual_stack(200)),
        ("inception 1k", lambda: synthetic.inception(56)),
        ("random DAG 1k", lambda: synthetic.random_dag(1_000, seed=1)),
        ("residual train 1.1k", lambda: synthetic.with_backward(synthetic.residual_stack(100))),
        ("inception train 1.2k", lambda: synthetic.with_backward(synthetic.inception(30))),
        ("random train 2.1k", lambda: synthetic.with_backward(synthetic.random_dag(1_000, seed=3))),
    ]
    large = [
        ("chain 10k", lambda: synthetic.chain(10_000)),
        ("random DAG 10k", lambda: synthetic.random_dag(10_000, seed=1)),
        ("residual 10k", lambda: synthetic.residual_stack(2_000)),
        ("residual train 5.5k", lambda: synthetic.with_backward(synthetic.residual_stack(500))),
        ("chain 100k", lambda: synthetic.chain(100_000)),
        ("residual 100k", lambda: synthetic.residual_stack(20_000)),
        ("inception 100k", lambda: synthetic.inception(5_600)),
        ("random DAG 100k", lambda: synthetic.random_dag(100_000, seed=1)),
    ]
    return small if quick else small + large


def mib(value: int) -> str:
    return f"{value / 2**20:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the graphs of about 1k nodes")
    parser.add_argument("--verify", action="store_true", help="verify every plan (slower)")
    args = parser.parse_args()
    header = (f"{'graph':<22} {'nodes':>7} {'strategy':<8} {'MiB':>12} {'x lower':>8} {'x none':>7} "
              f"{'x mxnet':>8} {'ms':>9}")
    print(header)
    print("-" * len(header))
    for name, make in graphs(args.quick):
        graph = make()
        started = time.perf_counter()
        lifetimes(graph)
        _profile, bound = lower_bound(graph)
        bound_ms = (time.perf_counter() - started) * 1e3
        plans = {strategy: plan_memory(graph, strategy) for strategy in STRATEGIES}
        if args.verify:
            for plan in plans.values():
                plan.verify(graph)
        none, mxnet = plans["none"].total_bytes, plans["mxnet"].total_bytes
        print(f"{name:<22} {graph.num_steps:>7} {'(bound)':<8} {mib(bound):>12} {1:>8.3f} "
              f"{bound / none if none else 0:>7.3f} {bound / mxnet if mxnet else 0:>8.3f} {bound_ms:>9.1f}")
        for strategy, plan in plans.items():
            total = plan.total_bytes
            chosen = f" ({plan.details['chosen']})" if strategy == "auto" else ""
            print(f"{'':<22} {'':>7} {strategy:<8} {mib(total):>12} {plan.ratio_to_lower_bound:>8.3f} "
                  f"{total / none if none else 0:>7.3f} {total / mxnet if mxnet else 0:>8.3f} "
                  f"{plan.planning_seconds * 1e3:>9.1f}{chosen}")


if __name__ == "__main__":
    main()
