"""Forward+backward time of a LeNet-like stack and a ResNet basic block, mxkit next to PyTorch and MXNet.

In one run, for each network:

- **mxkit**: the registry's operators (Convolution, Activation, Pooling, FullyConnected,
  SoftmaxOutput, BatchNorm) composed by calling their kernels on numpy, forward then backward
  through the registered backward operators (what an executor runs, without engine overhead;
  LeNet's first convolution, like PyTorch's, computes no gradient for the input images);
- **PyTorch** CPU (``loss.backward()`` after the forward), in a subprocess of the interpreter named
  by ``MXKIT_BENCH_TORCH_PYTHON`` (or in this process when it imports ``torch``);
- **MXNet 1.9.1** imperative with autograd, in a subprocess of the interpreter named by the
  environment variable ``MXKIT_BENCH_MXNET_PYTHON`` (left empty without it).

Networks: LeNet (batch 128, 1x28x28: conv 20@5x5, relu, max-pool 2, conv 50@5x5, relu,
max-pool 2, fc 500, relu, fc 10, softmax head) and a ResNet basic block (batch 32, 64
channels, 56x56: conv 3x3, BatchNorm, relu, conv 3x3, BatchNorm, add the input, relu).
mxkit's kernels run with BLAS limited to one thread, as the engine runs them (``mxkit train``): the
CPU plugin's convolution splits its batch across the cores itself (``--blas-threads`` changes this).
Milliseconds per forward+backward (best of ``--repeats`` after a warm-up: on a shared machine
the best run is the one least disturbed by other load) and samples/s;
the ratio columns are mxkit's time over the other's (below 1 means mxkit is faster). Nothing
here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python MXKIT_BENCH_TORCH_PYTHON=/path/to/torch/bin/python \
        python benchmarks/convnet.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from _timing import run_anchor

LENET = {"batch": 128, "shape": (1, 28, 28)}
RESNET_BLOCK = {"batch": 32, "shape": (64, 56, 56)}


# ---- mxkit: the registry's kernels, forward and backward -------------------------------------

class Kernels:
    """Runs registry operators on numpy: ``forward(name, inputs, **params)`` and gradients via ``F``."""

    def __init__(self) -> None:
        from mxkit.ndarray.registry import get_registry

        self.registry = get_registry()

    def forward(self, name, inputs, train=True, aux=(), req=None, **params):
        """``req``: MXNet's OpReqType per output, "null" for one nothing reads (an executor
        marks the data gradient of a first layer so, and the kernel skips computing it)."""
        op = self.registry.get(name)
        typed = op.parse_params(params)
        shapes = op.infer_shape(typed, [x.shape for x in inputs])
        dtypes = op.infer_dtype(typed, [x.dtype.name for x in inputs])
        outputs = [np.empty(s, dtype=d) for s, d in zip(shapes, dtypes)]
        run = dict(typed, _is_train=train)
        if req is not None:
            run["_req"] = tuple(req)
        op.kernel_for("numpy")(np, list(inputs) + list(aux), outputs, run)
        return outputs

    def __call__(self, name, *inputs, **params):
        params = {k: v for k, v in params.items() if not k.startswith("_")}
        outputs = self.forward(name, list(inputs), **params)
        return outputs[0] if len(outputs) == 1 else outputs

    def backward(self, name, inputs, outputs, out_grads, aux=(), **params):
        op = self.registry.get(name)
        typed = dict(op.parse_params(params), _is_train=True)
        return op.gradient(self, typed, list(inputs) + list(aux), outputs, out_grads)


def mxkit_lenet(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    k = Kernels()
    x = rng.standard_normal((batch, *LENET["shape"]), dtype=np.float32)
    label = rng.integers(0, 10, batch).astype(np.float32)
    w1, b1 = rng.standard_normal((20, 1, 5, 5), dtype=np.float32) * 0.1, np.zeros(20, np.float32)
    w2, b2 = rng.standard_normal((50, 20, 5, 5), dtype=np.float32) * 0.05, np.zeros(50, np.float32)
    w3, b3 = rng.standard_normal((500, 800), dtype=np.float32) * 0.03, np.zeros(500, np.float32)
    w4, b4 = rng.standard_normal((10, 500), dtype=np.float32) * 0.05, np.zeros(10, np.float32)
    conv1 = dict(kernel=(5, 5), num_filter=20)
    conv2 = dict(kernel=(5, 5), num_filter=50)
    pool = dict(kernel=(2, 2), stride=(2, 2), pool_type="max")

    def step():
        c1 = k.forward("Convolution", [x, w1, b1], **conv1)
        a1 = k.forward("Activation", c1, act_type="relu")
        p1 = k.forward("Pooling", a1, **pool)
        c2 = k.forward("Convolution", [p1[0], w2, b2], **conv2)
        a2 = k.forward("Activation", c2, act_type="relu")
        p2 = k.forward("Pooling", a2, **pool)
        f3 = k.forward("FullyConnected", [p2[0], w3, b3], num_hidden=500)
        a3 = k.forward("Activation", f3, act_type="relu")
        f4 = k.forward("FullyConnected", [a3[0], w4, b4], num_hidden=10)
        out = k.forward("SoftmaxOutput", [f4[0], label])
        g = k.backward("SoftmaxOutput", [f4[0], label], out, [out[0]])[0]  # head gradient ignored
        g, *_ = k.backward("FullyConnected", [a3[0], w4, b4], f4, [g], num_hidden=10)
        g = k.backward("Activation", f3, a3, [g], act_type="relu")[0]
        g, *_ = k.backward("FullyConnected", [p2[0], w3, b3], a3, [g], num_hidden=500)
        g = k.backward("Pooling", a2, p2, [g], **pool)[0]
        g = k.backward("Activation", c2, a2, [g], act_type="relu")[0]
        g, *_ = k.backward("Convolution", [p1[0], w2, b2], c2, [g], **conv2)
        g = k.backward("Pooling", a1, p1, [g], **pool)[0]
        g = k.backward("Activation", c1, a1, [g], act_type="relu")[0]
        # the first layer's data gradient is read by nothing (PyTorch's input has no requires_grad
        # either): the weight and bias gradients only, as an executor asks for them
        k.forward("_backward_Convolution", [g, x, w1], req=("null", "write", "write"), **conv1)

    return step


def mxkit_resnet_block(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    k = Kernels()
    channels = RESNET_BLOCK["shape"][0]
    x = rng.standard_normal((batch, *RESNET_BLOCK["shape"]), dtype=np.float32)
    w1 = rng.standard_normal((channels, channels, 3, 3), dtype=np.float32) * 0.05
    w2 = rng.standard_normal((channels, channels, 3, 3), dtype=np.float32) * 0.05
    gamma, beta = np.ones(channels, np.float32), np.zeros(channels, np.float32)
    stats = [np.zeros(channels, np.float32), np.ones(channels, np.float32)]
    conv = dict(kernel=(3, 3), pad=(1, 1), num_filter=channels, no_bias=True)
    bn = dict(fix_gamma=False)
    head = np.ones_like(x)

    def step():
        c1 = k.forward("Convolution", [x, w1], **conv)
        n1 = k.forward("BatchNorm", [c1[0], gamma, beta], aux=stats, **bn)
        a1 = k.forward("Activation", n1, act_type="relu")
        c2 = k.forward("Convolution", [a1[0], w2], **conv)
        n2 = k.forward("BatchNorm", [c2[0], gamma, beta], aux=stats, **bn)
        total = n2[0] + x
        out = np.maximum(total, 0)
        g = head * (out > 0)
        gx_skip = g
        g, *_ = k.backward("BatchNorm", [c2[0], gamma, beta], n2, [g], aux=stats, **bn)
        g, _ = k.backward("Convolution", [a1[0], w2], c2, [g], **conv)
        g = k.backward("Activation", n1, a1, [g], act_type="relu")[0]
        g, *_ = k.backward("BatchNorm", [c1[0], gamma, beta], n1, [g], aux=stats, **bn)
        g, _ = k.backward("Convolution", [x, w1], c1, [g], **conv)
        return g + gx_skip

    return step


def best_ms(step, repeats: int) -> float:
    """Best of ``repeats`` timed runs after a warm-up (the best is the least disturbed by other load)."""
    step()  # warm-up: first-touch allocations, BLAS thread start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


# ---- PyTorch ---------------------------------------------------------------------------------

def torch_times(repeats: dict) -> dict:
    try:
        import torch
        import torch.nn.functional as functional
    except ImportError:
        return {}
    torch.manual_seed(0)
    results = {}
    batch = LENET["batch"]
    x = torch.randn(batch, *LENET["shape"])
    label = torch.randint(0, 10, (batch,))
    params = [torch.randn(20, 1, 5, 5) * 0.1, torch.zeros(20), torch.randn(50, 20, 5, 5) * 0.05, torch.zeros(50),
              torch.randn(500, 800) * 0.03, torch.zeros(500), torch.randn(10, 500) * 0.05, torch.zeros(10)]
    for p in params:
        p.requires_grad_(True)

    def lenet():
        w1, b1, w2, b2, w3, b3, w4, b4 = params
        h = functional.max_pool2d(functional.relu(functional.conv2d(x, w1, b1)), 2)
        h = functional.max_pool2d(functional.relu(functional.conv2d(h, w2, b2)), 2)
        h = functional.relu(functional.linear(h.flatten(1), w3, b3))
        loss = functional.cross_entropy(functional.linear(h, w4, b4), label, reduction="sum")
        loss.backward()

    results["lenet"] = best_ms(lenet, repeats["lenet"])
    channels = RESNET_BLOCK["shape"][0]
    xb = torch.randn(RESNET_BLOCK["batch"], *RESNET_BLOCK["shape"], requires_grad=True)
    conv_w = [(torch.randn(channels, channels, 3, 3) * 0.05).requires_grad_(True) for _ in range(2)]
    bn = [(torch.ones(channels, requires_grad=True), torch.zeros(channels, requires_grad=True)) for _ in range(2)]
    running = [(torch.zeros(channels), torch.ones(channels)) for _ in range(2)]

    def block():
        h = functional.conv2d(xb, conv_w[0], padding=1)
        h = functional.relu(functional.batch_norm(h, *running[0], *bn[0], training=True, eps=1e-3))
        h = functional.conv2d(h, conv_w[1], padding=1)
        h = functional.batch_norm(h, *running[1], *bn[1], training=True, eps=1e-3)
        functional.relu(h + xb).backward(torch.ones_like(xb))

    results["resnet_block"] = best_ms(block, repeats["resnet_block"])
    results["threads"] = torch.get_num_threads()
    return results


def torch_anchor(repeats: dict) -> dict:
    """PyTorch's times: in the interpreter of ``MXKIT_BENCH_TORCH_PYTHON``, else here when torch imports."""
    interpreter = os.environ.get("MXKIT_BENCH_TORCH_PYTHON")
    if not interpreter:
        return torch_times(repeats)
    done = subprocess.run([interpreter, os.path.abspath(__file__), "--torch-worker", json.dumps(repeats)],
                          capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"PyTorch run in {interpreter} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    return {}


# ---- MXNet 1.9.1 in a subprocess -------------------------------------------------------------

MXNET_SCRIPT = r"""
import json, sys, time
import mxnet as mx
repeats = json.loads(sys.argv[1])
nd, ag = mx.nd, mx.autograd
mx.random.seed(0)

def best_ms(step, n):
    step(); nd.waitall()
    times = []
    for _ in range(n):
        start = time.perf_counter(); step(); nd.waitall(); times.append(time.perf_counter() - start)
    return min(times) * 1000

x = nd.random.normal(shape=(128, 1, 28, 28)); label = nd.array([i % 10 for i in range(128)])
ps = [nd.random.normal(shape=s) * 0.05 for s in [(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (500, 800), (500,),
                                                 (10, 500), (10,)]]
for p in ps: p.attach_grad()
def lenet():
    w1, b1, w2, b2, w3, b3, w4, b4 = ps
    with ag.record():
        h = nd.Pooling(nd.relu(nd.Convolution(x, w1, b1, kernel=(5, 5), num_filter=20)), kernel=(2, 2), stride=(2, 2))
        h = nd.Pooling(nd.relu(nd.Convolution(h, w2, b2, kernel=(5, 5), num_filter=50)), kernel=(2, 2), stride=(2, 2))
        h = nd.relu(nd.FullyConnected(h, w3, b3, num_hidden=500))
        out = nd.SoftmaxOutput(nd.FullyConnected(h, w4, b4, num_hidden=10), label)
    out.backward()
result = {"lenet": best_ms(lenet, repeats["lenet"])}
c = 64
xb = nd.random.normal(shape=(32, c, 56, 56)); xb.attach_grad()
ws = [nd.random.normal(shape=(c, c, 3, 3)) * 0.05 for _ in range(2)]
gs = [nd.ones(c) for _ in range(2)]; bs = [nd.zeros(c) for _ in range(2)]
mm = [nd.zeros(c) for _ in range(2)]; mv = [nd.ones(c) for _ in range(2)]
for a in ws + gs + bs: a.attach_grad()
def block():
    with ag.record():
        h = nd.Convolution(xb, ws[0], kernel=(3, 3), pad=(1, 1), num_filter=c, no_bias=True)
        h = nd.relu(nd.BatchNorm(h, gs[0], bs[0], mm[0], mv[0], fix_gamma=False))
        h = nd.Convolution(h, ws[1], kernel=(3, 3), pad=(1, 1), num_filter=c, no_bias=True)
        h = nd.BatchNorm(h, gs[1], bs[1], mm[1], mv[1], fix_gamma=False)
        out = nd.relu(h + xb)
    out.backward()
result["resnet_block"] = best_ms(block, repeats["resnet_block"])
print("RESULT " + json.dumps(result))
"""


def mxnet_times(repeats: dict) -> dict:
    return run_anchor(os.environ.get("MXKIT_BENCH_MXNET_PYTHON"), MXNET_SCRIPT, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per network (best reported)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads of mxkit's kernels (default 1, as the engine runs them; 0: BLAS's own)")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        print("RESULT " + json.dumps(torch_times(json.loads(args.torch_worker))))
        return
    repeats = {"lenet": args.repeats * 2, "resnet_block": args.repeats}
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=args.blas_threads or None, user_api="blas"):
        mxkit = {"lenet": best_ms(mxkit_lenet(LENET["batch"]), repeats["lenet"]),
                 "resnet_block": best_ms(mxkit_resnet_block(RESNET_BLOCK["batch"]), repeats["resnet_block"])}
    torch = torch_anchor(repeats)
    mxnet = mxnet_times(repeats)
    batches = {"lenet": LENET["batch"], "resnet_block": RESNET_BLOCK["batch"]}

    def cell(value):
        return f"{value:>10.1f}" if value else f"{'-':>10}"

    def ratio(a, b):
        return f"{a / b:>12.2f}" if b else f"{'-':>12}"

    blas = f"BLAS threads {args.blas_threads}" if args.blas_threads else "BLAS threads: its own"
    print(f"forward+backward, ms (best of runs); {os.cpu_count()} CPUs; numpy {np.__version__}; mxkit {blas}")
    print(f"{'network':<14}{'mxkit':>10}{'PyTorch':>10}{'MXNet':>10}{'mxkit/torch':>12}{'mxkit/mxnet':>12}"
          f"{'mxkit smp/s':>12}{'torch smp/s':>12}{'mxnet smp/s':>12}")
    for name in ("lenet", "resnet_block"):
        ours, theirs, reference = mxkit[name], torch.get(name), mxnet.get(name)
        rates = [f"{batches[name] / (t / 1000):>12.0f}" if t else f"{'-':>12}" for t in (ours, theirs, reference)]
        print(f"{name:<14}{cell(ours)}{cell(theirs)}{cell(reference)}{ratio(ours, theirs)}{ratio(ours, reference)}"
              + "".join(rates))
    if not torch:
        print("(MXKIT_BENCH_TORCH_PYTHON not set and torch not importable, or PyTorch failed: its columns are empty)")
    if not mxnet:
        print("(MXKIT_BENCH_MXNET_PYTHON not set or MXNet failed: its columns are empty)")


if __name__ == "__main__":
    main()
