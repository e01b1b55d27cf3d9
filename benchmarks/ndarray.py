"""NDArray operator latency and throughput, side by side with numpy, PyTorch and MXNet 1.x.

Run it standalone: ``python benchmarks/ndarray.py [--quick]``; PyTorch and MXNet run in this
interpreter when it imports them, otherwise in the interpreters named by
``MXKIT_BENCH_TORCH_PYTHON`` / ``MXKIT_BENCH_MXNET_PYTHON`` (as benchmarks/training.py). Rows: a small add
(two 10-element arrays) synchronised once at the end and synchronised after every op,
a medium add (1e5 elements), a large add (1e7 elements) and a 2048x2048 float32 matmul.
Columns: microseconds per op for every framework found, and mxkit's ratio to numpy.
mxkit runs on the engine of config ``engine`` (``MXKIT_ENGINE=naive`` to compare).
After the table, the cost of one small call split by stage (see :func:`dispatch_stages`).
Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
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


def dispatch_stages(count: int, repeats: int) -> list[tuple[str, str, float]]:
    """Where the microseconds of one small call go, for ``a + b``, an autograd-recorded ``a * b``,
    the generic operator path (10 elements, threaded engine) and a tiny autograd MLP step (its
    backward pass walked, and replayed from the plan of its first pass): each stage is timed alone through mxkit's
    published names, and what the stages do not explain is the Python glue between them
    (operator lookup, argument checks, the kernel's closure, reads/writes lists).
    Returns ``(call, stage, microseconds)`` rows."""
    from _timing import time_interleaved
    from mxkit import mx
    from mxkit.ndarray import autograd
    from mxkit.ndarray.invoke import engine, fast_backend, invoke
    from mxkit.ndarray.ndarray import NDArray
    from mxkit.ndarray.registry import get_registry

    a, b = mx.nd.ones((10,)), mx.nd.ones((10,))
    eng = engine()
    backend = fast_backend(a.context)
    xp = backend.xp
    out = backend.empty((10,), a.dtype)
    a_data, b_data = a.asnumpy(), b.asnumpy()

    def noop():
        pass

    def ops(name):
        op = get_registry().get(name)
        return op, op.kernels.get(backend.name) or op.kernel or op.kernel_for(backend.name)

    _, add_kernel = ops("broadcast_add")
    mul, mul_kernel = ops("broadcast_mul")
    target = eng.new_var()
    reads, writes = [a.var, b.var], [target]
    supports_small = getattr(type(eng), "inline_small_ops", False)
    push_args = (False, True) if supports_small else ()

    def hundred(fn):
        def run():
            for _ in range(100):
                fn()
        return run

    def recorded():
        # a graph of 100 ops at a time, as a training step records (a graph of 20000
        # nodes would measure the garbage collector walking it)
        with autograd.record():
            for _ in range(100):
                a * b

    step_forward, step_backward = _tiny_mlp(mx)

    def walked_step():
        autograd.replay_backward = False
        try:
            step_backward(step_forward())
        finally:
            autograd.replay_backward = True

    stages = {
        "mlp_walked": walked_step,  # (one step per call: the rows scale by 100 below)
        "mlp_replayed": lambda: step_backward(step_forward()),
        "kernel_add": hundred(lambda: add_kernel(xp, [a_data, b_data], [out], {})),
        "kernel_mul": hundred(lambda: mul_kernel(xp, [a_data, b_data], [out], {})),
        "allocate": hundred(lambda: NDArray.from_storage(backend.empty((10,), a.dtype), a.context, eng.new_var())),
        "push": hundred(lambda: eng.push(noop, reads, writes, a.context, 0, "stage", *push_args)),
        "sync": hundred(lambda: eng.wait_for_var(target)),
        "add_total": hundred(lambda: a + b),
        "add_synced": hundred(lambda: (a + b).wait_to_read()),
        "mul_total": hundred(lambda: a * b),
        "invoke_mul": hundred(lambda: invoke(mul, [a, b], {})),
        "by_name": hundred(lambda: mx.nd.broadcast_mul(a, b)),
        "recorded_mul": recorded,
    }
    a.attach_grad()  # (only the recorded stage looks at it: the others record nothing)
    # every stage in turn, best block of each: a neighbour's load hits them alike
    best = time_interleaved({name: (fn, eng.wait_all) for name, fn in stages.items()}, max(count // 100, 1),
                            repeats)
    us = {name: seconds * 1e6 / 100 for name, seconds in best.items()}
    kernel_add, kernel_mul, allocate, push, sync = (us[k] for k in ("kernel_add", "kernel_mul", "allocate", "push",
                                                                    "sync"))
    add_total, add_synced, mul_total, invoke_mul, by_name, recorded_mul = (
        us[k] for k in ("add_total", "add_synced", "mul_total", "invoke_mul", "by_name", "recorded_mul"))
    walked, replayed = us["mlp_walked"] * 100, us["mlp_replayed"] * 100
    rows = [
        ("a + b", "kernel (numpy, on 10 elements)", kernel_add),
        ("a + b", "output: buffer, engine var, NDArray", allocate),
        ("a + b", "engine push (small: run inline)" if supports_small else "engine push", push),
        ("a + b", "glue: lookup, checks, closure, lists", add_total - kernel_add - allocate - push),
        ("a + b", "= total, no sync", add_total),
        ("a + b", "sync on a ready var", sync),
        ("a + b", "= total, wait_to_read each", add_synced),
        ("recorded a * b", "= a * b, not recorded (the a + b path)", mul_total),
        ("recorded a * b", "autograd recording", recorded_mul - mul_total),
        ("recorded a * b", "= total under autograd.record()", recorded_mul),
        ("invoke(broadcast_mul)", "kernel (numpy)", kernel_mul),
        ("invoke(broadcast_mul)", "output: buffer, engine var, NDArray", allocate),
        ("invoke(broadcast_mul)", "engine push", push),
        ("invoke(broadcast_mul)", "glue: inference lookup, checks, lists", invoke_mul - kernel_mul - allocate - push),
        ("invoke(broadcast_mul)", "= total (any registry operator's path)", invoke_mul),
        ("mx.nd.broadcast_mul", "parameter parsing by name", by_name - invoke_mul),
        ("mx.nd.broadcast_mul", "= total, not recorded", by_name),
        # (forward alone is not a row: a graph never differentiated is freed by the garbage collector)
        ("autograd MLP step", "forward + backward, walked", walked),
        ("autograd MLP step", "forward + backward, replayed", replayed),
        ("autograd MLP step", "saved by replaying the backward", walked - replayed),
    ]
    return rows


def _tiny_mlp(mx):
    """``(forward, backward)`` of a recorded MLP step on arrays of a few elements (16-8-8-4, batch
    2: the kernels cost little, so the times are the dispatch, recording and backward walk)."""
    import itertools

    rng = np.random.default_rng(0)
    sizes = (16, 8, 8, 4)
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        params += [mx.nd.array(rng.standard_normal((fan_out, fan_in)).astype("float32")), mx.nd.zeros((fan_out,))]
    for param in params:
        param.attach_grad()
    data = mx.nd.array(rng.standard_normal((2, 16)).astype("float32"))
    label = mx.nd.array(rng.integers(0, 4, 2).astype("float32"))

    def forward():
        with mx.autograd.record():
            h = data
            for i in range(3):
                h = mx.nd.FullyConnected(h, params[2 * i], params[2 * i + 1], num_hidden=sizes[i + 1])
                if i < 2:
                    h = mx.nd.Activation(h, act_type="relu")
            return mx.nd.SoftmaxOutput(h, label)

    return forward, lambda out: out.backward()


def print_stages(rows: list[tuple[str, str, float]]) -> None:
    print("\nper-stage cost of one small call in mxkit (us; glue = total minus the timed stages)")
    print(f"{'call':<22}{'stage':<44}{'us':>8}")
    print("-" * 74)
    for call, stage, micros in rows:
        print(f"{call:<22}{stage:<44}{micros:>8.2f}")


def _blas_as_without_mxkit(framework: str):
    """numpy and PyTorch run with BLAS on every core, as they do without mxkit in the process
    (mxkit limits numpy's BLAS to config ``cpu_blas_threads`` once it uses the CPU, and splits
    big products across its own kernel threads instead)."""
    if framework == "mxkit":
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an anchor's interpreter without it: its own default threads
        return contextlib.nullcontext()

    return threadpool_limits(limits=os.cpu_count(), user_api="blas")


ROWS = [
    # label, which case (0 sync at end, 1 sync each, 2 matmul), elements, ops per timing
    ("add 10, sync at end", 0, 10, 20000),
    ("add 10, sync each op", 1, 10, 20000),
    ("add 1e5", 0, 100_000, 2000),
    ("add 1e7", 0, 10_000_000, 20),
    ("matmul 2048^2 f32", 2, None, 3),
]


FRAMEWORKS = {"numpy": numpy_cases, "mxkit": mxkit_cases, "torch": torch_cases, "mxnet": mxnet_cases}


def measure(names: list[str], scale: float, repeats: int) -> dict[str, dict[str, float]]:
    """``{row label: {framework: us per op}}`` for the frameworks of ``names`` importable here."""
    available = {}
    for name in names:
        try:
            available[name] = FRAMEWORKS[name]()
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
    return results


def _in_anchor(python: str | None, name: str, quick: bool) -> dict[str, float]:
    """``{row label: us per op}`` of ``name`` measured by this script in another interpreter."""
    if not python:
        return {}
    command = [python, os.path.abspath(__file__), "--worker", name] + (["--quick"] if quick else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"[{name} anchor failed: {done.stderr.strip().splitlines()[-1:]}]", file=sys.stderr)
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"),
                        help="interpreter of a PyTorch environment (when torch is not importable here)")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"),
                        help="interpreter of an MXNet 1.x environment (when mxnet is not importable here)")
    parser.add_argument("--worker", choices=("torch", "mxnet"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    scale = 0.05 if args.quick else 1.0
    repeats = 2 if args.quick else 5
    if args.worker:
        results = measure([args.worker], scale, repeats)
        print("RESULT " + json.dumps({label: row[args.worker] for label, row in results.items() if row}))
        return
    results = measure(list(FRAMEWORKS), scale, repeats)
    frameworks = FRAMEWORKS
    for name, python in (("torch", args.torch_python), ("mxnet", args.mxnet_python)):
        if not any(name in row for row in results.values()):
            for label, micros in _in_anchor(python, name, args.quick).items():
                results[label][name] = micros
    available = [name for name in FRAMEWORKS if any(name in row for row in results.values())]
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
        cells = "".join(f"{row[n]:>12.2f}" if n in row else f"{'-':>12}" for n in names)
        ratio = row["mxkit"] / row["numpy"] if "mxkit" in row and "numpy" in row else float("nan")
        print(f"{label:<24}{cells}{ratio:>12.2f}x")
    print("\ntargets: small add under 5 us synced at the end and under 15 us synced after every op, through "
          "the threaded engine; large ops within 10% of numpy")
    if "mxkit" in available:
        print_stages(dispatch_stages(max(int(5000 * scale), 50), repeats))


if __name__ == "__main__":
    main()
