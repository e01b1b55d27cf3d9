"""Elementwise fusion and recomputation (mirror): time and memory against the anchors.

Table 1, elementwise chains on 1e6 and 1e7 float32 elements, forward only:

- ``a*b+1``; a GELU written from small operators (tanh form); an activation chain
  ``sigmoid(tanh(relu(2x+1))) * x``; a LayerNorm-like broadcast chain
  ``(x - mean) * rsqrt(var + eps) * gamma + beta`` over (N/1024, 1024) with the row
  statistics given;
- rows: hand-written numpy (the reference), the mxkit executor unfused
  (``graph_passes=prune``), fused through numexpr, fused through the ``out=`` ufunc
  sequence (numexpr turned off), PyTorch CPU eager and the MXNet 1.9.1 executor (each in a
  subprocess of the interpreter named by ``MXKIT_BENCH_TORCH_PYTHON`` /
  ``MXKIT_BENCH_MXNET_PYTHON``, or ``--torch-python`` / ``--mxnet-python``; skipped when
  absent); columns: milliseconds (best of ``--repeats``; the in-process rows alternate, so
  a neighbour's load hits them alike), time over numpy, and the megabytes the memory plan
  gives intermediates (mxkit rows).

Table 2, training memory with and without recomputation: the memory plan's bytes for a
deep MLP and a Conv-BatchNorm-ReLU stack, unmirrored and with ``mirror`` under the
``sqrt`` and ``cheap`` policies, with the training-step time relative to unmirrored; the
MXNet 1.9.1 column is its executor's ``Total ... MB allocated`` with
``MXNET_BACKWARD_DO_MIRROR`` 0 and 1 (its allocation for intermediates, as mxkit's plan).
Nothing here asserts on time.

    python benchmarks/fusion.py [--sizes 1e6,1e7] [--repeats 5] [--memory-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROW_WIDTH = 1024
EPS = 1e-5
C_GELU = 0.7978845608028654


def case_inputs(case: str, size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def draw(*shape):
        return rng.standard_normal(shape).astype("float32")

    if case == "a*b+1":
        return {"a": draw(size), "b": draw(size)}
    if case in ("gelu", "activations"):
        return {"x": draw(size)}
    rows = size // ROW_WIDTH
    return {"x": draw(rows, ROW_WIDTH), "mean": draw(rows, 1), "var": np.abs(draw(rows, 1)) + 0.5,
            "gamma": draw(1, ROW_WIDTH), "beta": draw(1, ROW_WIDTH)}


CASES = ("a*b+1", "gelu", "activations", "layernorm-like")


def array_expression(case: str, v: dict, F) -> object:
    """The case over arrays with numpy-style broadcasting (numpy, torch); ``F`` gives tanh etc."""
    if case == "a*b+1":
        return v["a"] * v["b"] + 1
    if case == "gelu":
        x = v["x"]
        return 0.5 * x * (1 + F.tanh(C_GELU * (x + 0.044715 * x * x * x)))
    if case == "activations":
        x = v["x"]
        return F.sigmoid(F.tanh(F.relu(x * 2 + 1))) * x
    return (v["x"] - v["mean"]) * F.rsqrt(v["var"] + EPS) * v["gamma"] + v["beta"]


def symbol_expression(case: str, sym) -> object:
    """The case as a symbol (mxkit's and MXNet's ``mx.sym`` alike)."""
    if case == "a*b+1":
        return sym.Variable("a") * sym.Variable("b") + 1
    if case == "gelu":
        x = sym.Variable("x")
        return 0.5 * x * (1 + sym.tanh(C_GELU * (x + 0.044715 * x * x * x)))
    if case == "activations":
        x = sym.Variable("x")
        return sym.sigmoid(sym.tanh(sym.Activation(x * 2 + 1, act_type="relu"))) * x
    names = ("x", "mean", "var", "gamma", "beta")
    x, mean, var, gamma, beta = (sym.Variable(n) for n in names)
    scaled = sym.broadcast_mul(sym.broadcast_sub(x, mean), sym.rsqrt(var + EPS))
    return sym.broadcast_add(sym.broadcast_mul(scaled, gamma), beta)


class NumpyFunctions:
    tanh = staticmethod(np.tanh)

    @staticmethod
    def sigmoid(x):
        return 1 / (1 + np.exp(-x))

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def rsqrt(x):
        return 1 / np.sqrt(x)


def best_of(function, repeats: int) -> float:
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


# ---- mxkit -------------------------------------------------------------------------------------

def mxkit_forward(case: str, values: dict, passes: list[str], numexpr: str) -> tuple[int, object, np.ndarray]:
    """The planned intermediate bytes, a function running one forward, and its output."""
    from mxkit import symbol as sym
    from mxkit.core import config
    from mxkit.ndarray.ops.fused_elemwise import use_numexpr

    net = symbol_expression(case, sym)
    with config.override(graph_passes=passes):
        exe = net.simple_bind(None, grad_req="null", **{n: v.shape for n, v in values.items()})
    for name, value in values.items():
        exe.arg_dict[name][:] = value

    def run():
        with use_numexpr(numexpr):
            exe.forward()
            exe.outputs[0].wait_to_read()

    run()
    return exe.memory_plan.total_bytes, run, exe.outputs[0].asnumpy()


# ---- anchors in subprocesses -------------------------------------------------------------------

def worker(kind: str, sizes: list[int], repeats: int) -> None:
    """Time every case with torch or MXNet and print JSON (runs under the anchor's interpreter)."""
    results = {}
    for size in sizes:
        for case in CASES:
            values = case_inputs(case, size)
            if kind == "torch":
                import torch

                tensors = {n: torch.from_numpy(v) for n, v in values.items()}
                seconds = best_of(lambda case=case, tensors=tensors: array_expression(case, tensors, torch), repeats)
            else:
                import mxnet as mx

                exe = symbol_expression(case, mx.sym).simple_bind(mx.cpu(), grad_req="null",
                                                                   **{n: v.shape for n, v in values.items()})
                for name, value in values.items():
                    exe.arg_dict[name][:] = value

                def run(exe=exe):
                    exe.forward()
                    exe.outputs[0].wait_to_read()

                seconds = best_of(run, repeats)
            results[f"{case}@{size}"] = seconds
    if kind == "mxnet":
        results["memory"] = mxnet_memory()
    print(json.dumps(results))


def run_worker(interpreter: str | None, kind: str, sizes: list[int], repeats: int) -> dict:
    if not interpreter:
        return {}
    try:
        done = subprocess.run([interpreter, os.path.abspath(__file__), "--worker", kind, "--sizes",
                               ",".join(map(str, sizes)), "--repeats", str(repeats)],
                              capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": ""})
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        print(f"({kind} anchor failed: {exc})", file=sys.stderr)
        return {}


# ---- recomputation ------------------------------------------------------------------------------

MLP_DEPTH, MLP_HIDDEN, MLP_BATCH = 48, 512, 64
CONV_DEPTH, CONV_CHANNELS, CONV_BATCH, CONV_SIZE = 12, 16, 8, 16


def deep_networks(sym) -> dict:
    """name -> (symbol, input shape): the same definitions for mxkit and MXNet."""
    x = sym.Variable("data")
    for i in range(MLP_DEPTH):
        x = sym.Activation(sym.FullyConnected(x, num_hidden=MLP_HIDDEN, name=f"fc{i}"), act_type="relu")
    mlp = sym.SoftmaxOutput(sym.FullyConnected(x, num_hidden=10, name="out"), name="softmax")
    x = sym.Variable("data")
    for i in range(CONV_DEPTH):
        x = sym.Convolution(x, num_filter=CONV_CHANNELS, kernel=(3, 3), pad=(1, 1), name=f"conv{i}")
        x = sym.Activation(sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}"), act_type="relu")
    conv = sym.SoftmaxOutput(sym.FullyConnected(sym.Flatten(x), num_hidden=10, name="out"), name="softmax")
    return {f"MLP {MLP_DEPTH}x{MLP_HIDDEN}, batch {MLP_BATCH}": (mlp, (MLP_BATCH, MLP_HIDDEN)),
            f"Conv-BN-ReLU x{CONV_DEPTH}, {CONV_CHANNELS}ch {CONV_SIZE}x{CONV_SIZE}, batch {CONV_BATCH}":
                (conv, (CONV_BATCH, 3, CONV_SIZE, CONV_SIZE))}


def mxnet_memory() -> dict:
    """MXNet 1.9.1's allocated MB per network without and with MXNET_BACKWARD_DO_MIRROR (subprocesses)."""
    if os.environ.get("MXNET_BACKWARD_DO_MIRROR") is not None:
        import mxnet as mx

        found = {}
        for name, (net, shape) in deep_networks(mx.sym).items():
            lines = net.simple_bind(mx.cpu(), data=shape).debug_str().splitlines()
            found[name] = int(next(line for line in lines if line.endswith("MB allocated")).split()[1])
        return found
    script = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import fusion, json; "
              "print(json.dumps(fusion.mxnet_memory()))")
    found = {}
    for flag in ("0", "1"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, "MXNET_BACKWARD_DO_MIRROR": flag})
        found[flag] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def mxkit_training(net, shape, passes: list[str], policy: str) -> tuple[int, object]:
    """The planned bytes of a training bind and a function running one training step."""
    from mxkit.core import config

    with config.override(graph_passes=passes, mirror_policy=policy):
        exe = net.simple_bind(None, data=shape)
    rng = np.random.default_rng(0)
    for name, array in exe.arg_dict.items():
        array[:] = rng.normal(scale=0.05, size=array.shape) if name != "softmax_label" else 1

    def step():
        exe.forward(is_train=True)
        exe.backward()
        for grad in exe.grad_dict.values():
            grad.wait_to_read()

    return exe.memory_plan.total_bytes, step


def interleaved_best(steps: list, repeats: int) -> list[float]:
    """Best time of each step, the steps alternating so that a neighbour's load hits them alike."""
    for step in steps:
        step()
    best = [float("inf")] * len(steps)
    for _ in range(repeats):
        for i, step in enumerate(steps):
            start = time.perf_counter()
            step()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


# ---- the tables ------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1e6,1e7")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"))
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"))
    parser.add_argument("--memory-only", action="store_true", help="only the recomputation table")
    parser.add_argument("--worker", choices=("torch", "mxnet"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    if args.worker:
        worker(args.worker, sizes, args.repeats)
        return
    if args.memory_only:
        sizes = []
    torch_times = run_worker(args.torch_python, "torch", sizes, args.repeats) if sizes else {}
    mxnet_times = run_worker(args.mxnet_python, "mxnet", sizes, args.repeats)

    print("Elementwise chains, float32, forward only: ms (time / numpy) [planned intermediate MB]")
    rows = ("numpy", "mxkit unfused", "mxkit fused (auto)", "fused numexpr", "fused ufuncs", "PyTorch eager",
            "MXNet 1.9.1")
    header = f"{'case':<16}{'elements':>10}  " + "".join(f"{r:>26}" for r in rows)
    print(header)
    print("-" * len(header))
    for size in sizes:
        for case in CASES:
            values = case_inputs(case, size)
            reference = array_expression(case, values, NumpyFunctions)
            binds = [mxkit_forward(case, values, passes, numexpr) for passes, numexpr in
                     ((["prune"], "auto"), (["prune", "fuse"], "auto"), (["prune", "fuse"], "always"),
                      (["prune", "fuse"], "never"))]
            for _, _, out in binds:
                np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)
            numpy_seconds, *seconds = interleaved_best(
                [lambda case=case, values=values: array_expression(case, values, NumpyFunctions),
                 *(run for _, run, _ in binds)], args.repeats)
            cells = [f"{numpy_seconds * 1e3:9.2f}"]
            for (planned, _, _), took in zip(binds, seconds):
                cells.append(f"{took * 1e3:.2f} ({took / numpy_seconds:.2f}x) [{planned / 2**20:.1f}]")
            for anchor in (torch_times, mxnet_times):
                seconds = anchor.get(f"{case}@{size}")
                cells.append("n/a" if seconds is None else f"{seconds * 1e3:.2f} ({seconds / numpy_seconds:.2f}x)")
            print(f"{case:<16}{size:>10.0e}  " + "".join(f"{c:>26}" for c in cells))

    from mxkit import symbol as sym

    print("\nTraining memory (memory plan) and step time with recomputation")
    header = (f"{'network':<44}{'unmirrored':>12}{'mirror sqrt':>32}{'mirror cheap':>32}"
              f"{'MXNet 1.9.1 MB (mirror 0 / 1)':>32}")
    print(header)
    print("-" * len(header))
    mxnet_memory_mb = mxnet_times.get("memory", {})
    for name, (net, shape) in deep_networks(sym).items():
        binds = [mxkit_training(net, shape, passes, policy) for passes, policy in
                 ((["prune", "fuse"], "sqrt"), (["prune", "mirror", "fuse"], "sqrt"),
                  (["prune", "mirror", "fuse"], "cheap"))]
        seconds = interleaved_best([step for _, step in binds], args.repeats)
        base_bytes = binds[0][0]
        cells = [f"{base_bytes / 2**20:.1f} MB"]
        for (planned, _), took in zip(binds[1:], seconds[1:]):
            cells.append(f"{planned / 2**20:.1f} MB ({planned / base_bytes:.2f}x, t {took / seconds[0]:.2f}x)")
        mxnet_cell = "n/a"
        if mxnet_memory_mb:
            mxnet_cell = f"{mxnet_memory_mb['0'].get(name, '?')} / {mxnet_memory_mb['1'].get(name, '?')}"
        print(f"{name:<44}" + "".join(f"{c:>32}" if i else f"{c:>12}" for i, c in enumerate(cells))
              + f"{mxnet_cell:>32}")
    print("\nmirror columns: planned bytes relative to unmirrored, and training-step time relative to unmirrored."
          "\nMXNet's figure is the 'Total ... MB allocated' line of its executor's debug_str (rounded to MB).")


if __name__ == "__main__":
    main()
