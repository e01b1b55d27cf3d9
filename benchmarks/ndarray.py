"""NDArray operator latency and throughput, side by side with numpy, PyTorch and MXNet 1.x.

Run it standalone: ``python benchmarks/ndarray.py [--quick]``. Rows: a small add
(two 10-element arrays) synchronised once at the end and synchronised after every op,
a medium add (1e5 elements), a large add (1e7 elements) and a 2048x2048 float32 matmul.
Columns: microseconds per op for every framework found, and mxkit's ratio to numpy.
mxkit runs on the engine of config ``engine`` (``MXKIT_ENGINE=naive`` to compare).
Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable

import numpy as np


def best_per_op(run: Callable[[int], None], count: int, repeats: int) -> float:
    """Best (least disturbed) of ``repeats`` timings of ``run(count)``, in microseconds per op."""
    run(max(count // 10, 1))  # warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(count)
        samples.append((time.perf_counter() - start) / count * 1e6)
    return min(samples) if len(samples) < 5 else statistics.median(sorted(samples)[: len(samples) // 2 + 1])


def numpy_cases():
    def add(n_elements):
        a = np.ones(n_elements, np.float32)
        b = np.ones(n_elements, np.float32)

        def run(count):
            for _ in range(count):
                np.add(a, b)

        return run

    def matmul():
        a = np.ones((2048, 2048), np.float32)

        def run(count):
            for _ in range(count):
                a @ a

        return run

    return add, add, matmul


def mxkit_cases():
    from mxkit import mx

    def add_sync_end(n_elements):
        a = mx.nd.ones((n_elements,))
        b = mx.nd.ones((n_elements,))

        def run(count):
            for _ in range(count):
                c = a + b
            c.wait_to_read()

        return run

    def add_sync_each(n_elements):
        a = mx.nd.ones((n_elements,))
        b = mx.nd.ones((n_elements,))

        def run(count):
            for _ in range(count):
                (a + b).wait_to_read()

        return run

    def matmul():
        a = mx.nd.ones((2048, 2048))

        def run(count):
            for _ in range(count):
                c = mx.nd.dot(a, a)
            c.wait_to_read()

        return run

    return add_sync_end, add_sync_each, matmul


def torch_cases():
    import torch

    def add(n_elements):
        a = torch.ones(n_elements)
        b = torch.ones(n_elements)

        def run(count):
            for _ in range(count):
                a + b

        return run

    def matmul():
        a = torch.ones((2048, 2048))

        def run(count):
            for _ in range(count):
                a @ a

        return run

    return add, add, matmul


def mxnet_cases():
    import mxnet

    def add_sync_end(n_elements):
        a = mxnet.nd.ones((n_elements,))
        b = mxnet.nd.ones((n_elements,))

        def run(count):
            for _ in range(count):
                c = a + b
            c.wait_to_read()

        return run

    def add_sync_each(n_elements):
        a = mxnet.nd.ones((n_elements,))
        b = mxnet.nd.ones((n_elements,))

        def run(count):
            for _ in range(count):
                (a + b).wait_to_read()

        return run

    def matmul():
        a = mxnet.nd.ones((2048, 2048))

        def run(count):
            for _ in range(count):
                c = mxnet.nd.dot(a, a)
            c.wait_to_read()

        return run

    return add_sync_end, add_sync_each, matmul


def _blas_as_without_mxkit(framework: str):
    """numpy and PyTorch run with BLAS on every core, as they do without mxkit in the process
    (mxkit limits numpy's BLAS to config ``cpu_blas_threads`` once it uses the CPU, and splits
    big products across its own kernel threads instead)."""
    if framework == "mxkit":
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=os.cpu_count(), user_api="blas")


ROWS = [
    # label, which case (0 sync at end, 1 sync each, 2 matmul), elements, ops per timing
    ("add 10, sync at end", 0, 10, 20000),
    ("add 10, sync each op", 1, 10, 20000),
    ("add 1e5", 0, 100_000, 2000),
    ("add 1e7", 0, 10_000_000, 20),
    ("matmul 2048^2 f32", 2, None, 3),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args()
    scale = 0.05 if args.quick else 1.0
    repeats = 2 if args.quick else 5
    frameworks = {"numpy": numpy_cases, "mxkit": mxkit_cases, "torch": torch_cases, "mxnet": mxnet_cases}
    available = {}
    for name, make in frameworks.items():
        try:
            available[name] = make()
        except ImportError:
            pass
    results: dict[str, dict[str, float]] = {label: {} for label, *_ in ROWS}
    for label, kind, elements, count in ROWS:
        count = max(int(count * scale), 1)
        for name, cases in available.items():
            maker = cases[kind]
            run = maker() if kind == 2 else maker(elements)
            with _blas_as_without_mxkit(name):
                results[label][name] = best_per_op(run, count, repeats)
    try:
        from mxkit.engine import get as get_engine

        engine_name = getattr(get_engine(), "name", "?")
    except ImportError:
        engine_name = "?"
    names = list(available)
    header = f"{'case (us per op)':<24}" + "".join(f"{n:>12}" for n in names) + f"{'mxkit/numpy':>13}"
    print(f"mxkit engine: {engine_name}; missing: {', '.join(set(frameworks) - set(names)) or 'none'}")
    print(header)
    print("-" * len(header))
    for label, *_ in ROWS:
        row = results[label]
        cells = "".join(f"{row[n]:>12.2f}" for n in names)
        ratio = row["mxkit"] / row["numpy"] if "mxkit" in row and "numpy" in row else float("nan")
        print(f"{label:<24}{cells}{ratio:>12.2f}x")
    print("\nanchors measured on this kind of machine for the small add: numpy 0.5 us, PyTorch 1.7 us, "
          "MXNet 32 us; targets: under 5 us through the threaded engine, large ops within 10% of numpy")


if __name__ == "__main__":
    main()
