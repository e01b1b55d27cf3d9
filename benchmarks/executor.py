"""Training steps per second of a 3-layer MLP (784-128-64-10, batch 128): the mxkit executor
next to imperative NDArray with autograd, numpy by hand, PyTorch and MXNet 1.9.1.

One step is forward + backward of FullyConnected -> relu -> FullyConnected -> relu ->
FullyConnected -> SoftmaxOutput (cross-entropy gradient), all gradients written, then an
SGD update of the six parameters, so every row does the same arithmetic:

- **mxkit executor**: ``simple_bind`` once, then ``forward(is_train=True)``/``backward()``
  on the engine, and the update as one engine operation over all six parameters (as
  MXNet's ``multi_sgd_update``);
- **mxkit NDArray+autograd**: the same layers as imperative ``mx.nd`` calls recorded by
  ``autograd.record()`` and differentiated by ``out.backward()``, updated with ``w -= lr * w.grad``;
  timed beside the other rows, and again **alone** in a fresh process (a program of only imperative
  calls runs its oneDNN calls on one thread; beside the executor row they are on two, whose OpenMP
  teams libgomp throttles);
- **numpy by hand**: the forward and the hand-derived backward in numpy, with preallocated
  buffers (the limit for this backend: the executor runs these same BLAS calls);
- **PyTorch** CPU when ``torch`` is importable, else in a subprocess of the interpreter named by
  ``MXKIT_BENCH_TORCH_PYTHON`` (or ``--torch-python``);
- **MXNet 1.9.1** executor (``simple_bind``) in a subprocess of the interpreter named by the
  environment variable ``MXKIT_BENCH_MXNET_PYTHON`` (or ``--mxnet-python``).

Printed: milliseconds per step (the best of ``--repeats`` timed blocks of ``--steps`` steps
after a warm-up; the in-process rows alternate blocks so a neighbour's load hits them
alike), samples/s, and each row's time relative to the mxkit executor and to numpy by hand.
Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python python benchmarks/executor.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys

import numpy as np
from _timing import time_interleaved

BATCH, SIZES, LR = 128, (784, 128, 64, 10), 0.01
AUTOGRAD_ALONE = "mxkit NDArray+autograd, alone"


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype("float32")
    label = rng.integers(0, SIZES[-1], BATCH).astype("float32")
    params = {}
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(SIZES), start=1):
        params[f"fc{i}_weight"] = (rng.standard_normal((fan_out, fan_in)) * np.sqrt(2 / fan_in)).astype("float32")
        params[f"fc{i}_bias"] = np.zeros(fan_out, dtype="float32")
    return x, label, params


def _no_sync() -> None:
    pass


# ---- mxkit --------------------------------------------------------------------------------

def mxkit_executor():
    from mxkit import mx

    x, label, params = _data()
    data = mx.sym.Variable("data")
    net = data
    for i in range(1, len(SIZES)):
        net = mx.sym.FullyConnected(net, num_hidden=SIZES[i], name=f"fc{i}")
        if i < len(SIZES) - 1:
            net = mx.sym.Activation(net, act_type="relu", name=f"relu{i}")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    exe = net.simple_bind(mx.cpu(), grad_req=reqs, data=x.shape, softmax_label=label.shape)
    exe.copy_params_from({k: mx.nd.array(v) for k, v in params.items()})
    exe.arg_dict["data"][:] = x
    exe.arg_dict["softmax_label"][:] = label
    update = _fused_sgd([exe.arg_dict[n] for n in params], [exe.grad_dict[n] for n in params])

    def step():
        exe.forward(is_train=True)
        exe.backward()
        update()

    return step, mx.nd.waitall


def _fused_sgd(weights: list, grads: list):
    """One engine operation updating every parameter (MXNet's ``multi_sgd_update``), ordered
    after the backward that writes the gradients and before the next forward that reads the
    weights through the arrays' engine vars."""
    import mxkit.engine as engine

    pairs = [(w.storage, g.storage) for w, g in zip(weights, grads)]
    reads, writes = [g.var for g in grads], [w.var for w in weights]
    ctx = weights[0].context

    def run():
        for weight, grad in pairs:
            weight -= LR * grad

    return lambda: engine.get().push(run, reads, writes, ctx, 0, "multi_sgd_update")


def mxkit_autograd():
    from mxkit import mx

    x, label, params = _data()
    data, target = mx.nd.array(x), mx.nd.array(label)
    weights = {k: mx.nd.array(v) for k, v in params.items()}
    for w in weights.values():
        w.attach_grad()

    def step():
        with mx.autograd.record():
            h = data
            for i in range(1, len(SIZES)):
                h = mx.nd.FullyConnected(h, weights[f"fc{i}_weight"], weights[f"fc{i}_bias"], num_hidden=SIZES[i])
                if i < len(SIZES) - 1:
                    h = mx.nd.Activation(h, act_type="relu")
            out = mx.nd.SoftmaxOutput(h, target)
        out.backward()
        for w in weights.values():
            w -= w.grad * LR

    return step, mx.nd.waitall


# ---- numpy by hand ------------------------------------------------------------------------

def numpy_by_hand():
    x, label, params = _data()
    w = [params[f"fc{i}_weight"] for i in (1, 2, 3)]
    b = [params[f"fc{i}_bias"] for i in (1, 2, 3)]
    onehot = np.zeros((BATCH, SIZES[-1]), dtype="float32")
    onehot[np.arange(BATCH), label.astype(int)] = 1
    h = [np.empty((BATCH, n), dtype="float32") for n in SIZES[1:]]

    def step():
        np.matmul(x, w[0].T, out=h[0])
        h[0] += b[0]
        a1 = np.maximum(h[0], 0)
        np.matmul(a1, w[1].T, out=h[1])
        h[1] += b[1]
        a2 = np.maximum(h[1], 0)
        np.matmul(a2, w[2].T, out=h[2])
        h[2] += b[2]
        e = np.exp(h[2] - h[2].max(axis=1, keepdims=True))
        prob = e / e.sum(axis=1, keepdims=True)
        g3 = prob - onehot
        gw3, gb3 = g3.T @ a2, g3.sum(0)
        g2 = (g3 @ w[2]) * (h[1] > 0)
        gw2, gb2 = g2.T @ a1, g2.sum(0)
        g1 = (g2 @ w[1]) * (h[0] > 0)
        gw1, gb1 = g1.T @ x, g1.sum(0)
        for param, grad in ((w[0], gw1), (w[1], gw2), (w[2], gw3), (b[0], gb1), (b[1], gb2), (b[2], gb3)):
            param -= LR * grad

    return step, _no_sync


# ---- PyTorch ------------------------------------------------------------------------------

def torch_cpu():
    try:
        import torch
    except ImportError:
        return None
    x, label, _ = _data()
    data, target = torch.from_numpy(x), torch.from_numpy(label).long()
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")

    def step():
        optimizer.zero_grad()
        loss_fn(model(data), target).backward()
        optimizer.step()

    return step, _no_sync


# ---- MXNet 1.9.1 --------------------------------------------------------------------------

_MXNET_SCRIPT = """
import json, sys, time
import mxnet as mx, numpy as np
steps, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
data = mx.sym.Variable("data")
net = mx.sym.FullyConnected(data, num_hidden=128, name="fc1")
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.FullyConnected(net, num_hidden=64, name="fc2")
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
net = mx.sym.SoftmaxOutput(net, name="softmax")
reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
exe = net.simple_bind(mx.cpu(), grad_req=reqs, data=(128, 784), softmax_label=(128,))
for name, arr in exe.arg_dict.items():
    arr[:] = rng.standard_normal(arr.shape).astype("float32") * 0.05
exe.arg_dict["softmax_label"][:] = rng.integers(0, 10, 128).astype("float32")
pairs = [(exe.arg_dict[n], exe.grad_dict[n]) for n in reqs if reqs[n] == "write"]
def step():
    exe.forward(is_train=True)
    exe.backward()
    for w, g in pairs:
        mx.nd.sgd_update(w, g, lr=0.01, out=w)
for _ in range(max(3, steps // 4)):
    step()
mx.nd.waitall()
blocks = []
for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    mx.nd.waitall()
    blocks.append((time.perf_counter() - start) / steps)
print(json.dumps({"seconds": min(blocks)}))
"""


#: the rows a fresh process of this file can time alone (``--worker``)
ALONE = {"torch": ("PyTorch CPU", torch_cpu), "autograd": ("mxkit NDArray+autograd", mxkit_autograd)}


def row_in_subprocess(kind: str, steps: int, repeats: int, interpreter: str | None) -> float | None:
    """Seconds per step of row ``kind`` (a key of :data:`ALONE`), timed alone by this file under
    ``interpreter`` (``--worker``)."""
    if not interpreter:
        return None
    result = subprocess.run([interpreter, os.path.abspath(__file__), "--worker", kind, "--steps", str(steps),
                             "--repeats", str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def mxnet_executor(steps: int, repeats: int, interpreter: str | None) -> float | None:
    if not interpreter:
        return None
    result = subprocess.run([interpreter, "-c", _MXNET_SCRIPT, str(steps), str(repeats)], capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks (the best is reported)")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"),
                        help="interpreter of an MXNet 1.9.1 environment")
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"),
                        help="interpreter of a PyTorch environment (when torch is not importable here)")
    parser.add_argument("--worker", choices=sorted(ALONE), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        name, setup = ALONE[args.worker]
        print(json.dumps({"seconds": time_interleaved({name: setup()}, args.steps, args.repeats)[name]}))
        return
    setups = {"mxkit executor": mxkit_executor(), "mxkit NDArray+autograd": mxkit_autograd(),
              "numpy by hand": numpy_by_hand()}
    torch_setup = torch_cpu()
    if torch_setup is not None:
        setups["PyTorch CPU"] = torch_setup
    seconds = time_interleaved(setups, args.steps, args.repeats)
    if torch_setup is None:
        seconds["PyTorch CPU"] = row_in_subprocess("torch", args.steps, args.repeats, args.torch_python)
    # the autograd row again in a process of its own: beside the executor row, oneDNN runs on two threads
    # (the executor's on the engine worker, the imperative calls inline on this one), two OpenMP teams that
    # libgomp then throttles for the rest of the process (docs/architecture.md)
    seconds[AUTOGRAD_ALONE] = row_in_subprocess("autograd", args.steps, args.repeats, sys.executable)
    rows = [(name, seconds.get(name)) for name in ("mxkit executor", "mxkit NDArray+autograd", AUTOGRAD_ALONE,
                                                   "numpy by hand", "PyTorch CPU")]
    rows.append(("MXNet 1.9.1 executor", mxnet_executor(args.steps, args.repeats, args.mxnet_python)))
    executor, by_hand = rows[0][1], rows[3][1]
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}: forward + backward + SGD update per step")
    header = f"{'implementation':<32} {'ms/step':>9} {'samples/s':>11} {'vs executor':>12} {'vs numpy':>9}"
    print(header)
    print("-" * len(header))
    for name, seconds in rows:
        if seconds is None:
            print(f"{name:<32} {'not installed':>9}")
            continue
        print(f"{name:<32} {seconds * 1e3:>9.3f} {BATCH / seconds:>11,.0f} {seconds / executor:>12.2f} "
              f"{seconds / by_hand:>9.2f}")
    print("\nratios are time over the other row's time: above 1 is slower than the mxkit executor / numpy.")
    print(f"'{AUTOGRAD_ALONE}': the autograd row timed alone, as a program of only imperative calls runs; beside\n"
          "the executor row its oneDNN calls share the process with the engine worker's (two OpenMP teams).")


if __name__ == "__main__":
    sys.exit(main())
