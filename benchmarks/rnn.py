"""Forward + backward time of a 2-layer LSTM (T=35, N=32, C=H=200, the PTB "small" shape) on
the CPU: mxkit's fused ``RNN`` operator next to MXNet 1.9.1's ``RNN`` operator and PyTorch's
``nn.LSTM``.

One step is the forward of the whole sequence in training mode, then backpropagation through
time with a gradient for the output, writing the gradients of the data, the packed
parameters and the initial states:

- **mxkit RNN op (executor)**: ``mx.sym.RNN`` bound once with ``simple_bind``,
  ``forward(is_train=True)`` and ``backward(out_grad)`` on the engine;
- **mxkit RNN op (autograd)**: the same operator called as ``mx.nd.RNN`` under
  ``autograd.record()``; each step writes fresh output and gradient arrays, so the engine
  may run one step's forward beside the previous step's backward on another core (the
  executor row reuses its arrays and runs steps one after another);
- **MXNet 1.9.1** ``mx.sym.RNN`` (its CPU kernel) in a subprocess of the interpreter named by
  ``MXKIT_BENCH_MXNET_PYTHON`` (or ``--mxnet-python``);
- **PyTorch** ``nn.LSTM`` when ``torch`` is importable, else in a subprocess of
  ``MXKIT_BENCH_TORCH_PYTHON`` (or ``--torch-python``).

Printed: milliseconds per step (best of ``--repeats`` blocks of ``--steps`` steps after a
warm-up) and each row's time relative to the mxkit executor row. Nothing asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/rnn.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _timing import run_anchor, time_interleaved

STEPS_T, BATCH, INPUT, HIDDEN, LAYERS = 35, 32, 200, 200, 2
SHAPE = {"T": STEPS_T, "N": BATCH, "C": INPUT, "H": HIDDEN, "L": LAYERS}


def _inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    gates = 4 * HIDDEN
    size = sum(gates * ((INPUT if layer == 0 else HIDDEN) + HIDDEN) + 2 * gates for layer in range(LAYERS))
    return {"data": rng.standard_normal((STEPS_T, BATCH, INPUT)).astype("float32"),
            "parameters": rng.uniform(-0.07, 0.07, size).astype("float32"),
            "state": np.zeros((LAYERS, BATCH, HIDDEN), "float32"),
            "state_cell": np.zeros((LAYERS, BATCH, HIDDEN), "float32"),
            "out_grad": rng.standard_normal((STEPS_T, BATCH, HIDDEN)).astype("float32")}


def mxkit_executor():
    from mxkit import mx

    values = _inputs()
    sym = mx.sym.RNN(mx.sym.var("data"), state_size=HIDDEN, num_layers=LAYERS, mode="lstm", name="rnn")
    exe = sym.simple_bind(mx.cpu(), data=values["data"].shape)
    for name, key in (("data", "data"), ("rnn_parameters", "parameters"), ("rnn_state", "state"),
                      ("rnn_state_cell", "state_cell")):
        exe.arg_dict[name][:] = values[key]
    out_grad = mx.nd.array(values["out_grad"])

    def step():
        exe.forward(is_train=True)
        exe.backward([out_grad])

    return step, mx.nd.waitall


def mxkit_autograd():
    from mxkit import mx
    from mxkit.ndarray import autograd

    values = _inputs()
    arrays = [mx.nd.array(values[k]) for k in ("data", "parameters", "state", "state_cell")]
    for array in arrays:
        array.attach_grad()
    out_grad = mx.nd.array(values["out_grad"])

    def step():
        with autograd.record():
            out = mx.nd.RNN(*arrays, state_size=HIDDEN, num_layers=LAYERS, mode="lstm")
        out.backward(out_grad)

    return step, mx.nd.waitall


def torch_cpu():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)  # as mxkit and MXNet below: one BLAS thread on a shared machine
    values = _inputs()
    lstm = torch.nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS)
    data = torch.from_numpy(values["data"]).requires_grad_()
    h0 = torch.from_numpy(values["state"]).requires_grad_()
    c0 = torch.from_numpy(values["state_cell"]).requires_grad_()
    out_grad = torch.from_numpy(values["out_grad"])

    def step():
        out, _ = lstm(data, (h0, c0))
        out.backward(out_grad)

    return step, lambda: None


_MXNET_SCRIPT = """
import json, os, sys, time
import mxnet as mx, numpy as np
args = json.loads(sys.argv[1])
s = args["shape"]
rng = np.random.default_rng(0)
sym = mx.sym.RNN(mx.sym.var("data"), state_size=s["H"], num_layers=s["L"], mode="lstm", name="rnn")
exe = sym.simple_bind(mx.cpu(), data=(s["T"], s["N"], s["C"]))
for name, arr in exe.arg_dict.items():
    arr[:] = rng.uniform(-0.07, 0.07, arr.shape).astype("float32")
out_grad = mx.nd.array(rng.standard_normal((s["T"], s["N"], s["H"])).astype("float32"))
def step():
    exe.forward(is_train=True)
    exe.backward([out_grad])
for _ in range(3):
    step()
mx.nd.waitall()
blocks = []
for _ in range(args["repeats"]):
    start = time.perf_counter()
    for _ in range(args["steps"]):
        step()
    mx.nd.waitall()
    blocks.append((time.perf_counter() - start) / args["steps"])
print("RESULT " + json.dumps({"seconds": min(blocks)}))
"""

_TORCH_SCRIPT = """
import json, sys
sys.path.insert(0, {folder!r})
import rnn
args = json.loads(sys.argv[1])
from _timing import time_interleaved
seconds = time_interleaved({{"torch": rnn.torch_cpu()}}, args["steps"], args["repeats"])["torch"]
print("RESULT " + json.dumps({{"seconds": seconds}}))
"""


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (the best is reported)")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"),
                        help="interpreter of an MXNet 1.9.1 environment")
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"),
                        help="interpreter of a PyTorch environment (when torch is not importable here)")
    args = parser.parse_args()
    setups = {"mxkit RNN op (executor)": mxkit_executor(), "mxkit RNN op (autograd)": mxkit_autograd()}
    torch_setup = torch_cpu()
    if torch_setup is not None:
        setups["PyTorch nn.LSTM"] = torch_setup
    seconds: dict[str, float | None] = dict(time_interleaved(setups, args.steps, args.repeats, warmup=2))
    anchor_args = {"steps": args.steps, "repeats": args.repeats, "shape": SHAPE}
    if torch_setup is None:
        folder = os.path.dirname(os.path.abspath(__file__))
        seconds["PyTorch nn.LSTM"] = run_anchor(args.torch_python, _TORCH_SCRIPT.format(folder=folder),
                                                anchor_args).get("seconds")
    seconds["MXNet 1.9.1 RNN op"] = run_anchor(args.mxnet_python, _MXNET_SCRIPT, anchor_args).get("seconds")
    base = seconds["mxkit RNN op (executor)"]
    print(f"LSTM {LAYERS} layers, T={STEPS_T} N={BATCH} C=H={HIDDEN}: forward + backward (BPTT) per step, CPU")
    header = f"{'implementation':<26} {'ms/step':>9} {'vs mxkit executor':>18}"
    print(header)
    print("-" * len(header))
    for name in ("mxkit RNN op (executor)", "mxkit RNN op (autograd)", "MXNet 1.9.1 RNN op", "PyTorch nn.LSTM"):
        value = seconds.get(name)
        if value is None:
            print(f"{name:<26} {'not installed':>9}")
            continue
        print(f"{name:<26} {value * 1e3:>9.2f} {value / base:>18.2f}")
    print("\nratios are time over the mxkit executor row's time: below 1 is faster than mxkit.")


if __name__ == "__main__":
    sys.exit(main())
