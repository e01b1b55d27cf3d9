"""Optimizer update steps: the time to update every parameter of a network once.

For the parameters of the MLP 784-128-64-10 (6 arrays, 109k values) and of LeNet (8 arrays,
431k values), with SGD (momentum 0.9, weight decay 1e-4) and Adam, one step updates every
weight from a fixed gradient:

- **numpy by hand**: the update formula in place with numpy (the memory-bound limit);
- **mxkit per weight**: ``updater(i, grad, weight)`` once per parameter (one engine
  operation each);
- **mxkit aggregated**: ``updater(indices, grads, weights)`` once, as MXNet's
  ``_update_params`` calls it per device (one engine operation for all);
- **PyTorch** ``torch.optim`` (its default foreach implementation), in this process when
  ``torch`` imports, else in a subprocess of ``MXKIT_BENCH_TORCH_PYTHON`` (``--torch-python``);
- **MXNet 1.9.1** ``mx.optimizer.get_updater`` called with the lists, in a subprocess of
  ``MXKIT_BENCH_MXNET_PYTHON`` (``--mxnet-python``).

Printed: microseconds per step (best of ``--repeats`` blocks of ``--steps`` steps after a
warm-up; the in-process rows alternate blocks) and each row's time relative to numpy and
to mxkit aggregated. Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python MXKIT_BENCH_TORCH_PYTHON=/path/to/torch/bin/python \\
        python benchmarks/optimizer.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from _timing import time_interleaved

NETWORKS = {
    "mlp": [(128, 784), (128,), (64, 128), (64,), (10, 64), (10,)],
    "lenet": [(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (500, 800), (500,), (10, 500), (10,)],
}
OPTIMIZERS = {
    "sgd": {"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4},
    "adam": {"learning_rate": 0.001},
}


def _arrays(shapes: list, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype("float32") * 0.1 for shape in shapes]


def numpy_by_hand(shapes: list, optimizer: str):
    weights, grads = _arrays(shapes, 0), _arrays(shapes, 1)
    kw = OPTIMIZERS[optimizer]
    if optimizer == "sgd":
        moms = [np.zeros_like(w) for w in weights]
        lr, momentum, wd = kw["learning_rate"], kw["momentum"], kw["wd"]

        def step() -> None:
            for w, g, m in zip(weights, grads, moms):
                m *= momentum
                m -= lr * g
                m -= (lr * wd) * w
                w += m
    else:
        means = [np.zeros_like(w) for w in weights]
        variances = [np.zeros_like(w) for w in weights]
        lr, counter = kw["learning_rate"], [0]

        def step() -> None:
            counter[0] += 1
            t = counter[0]
            lr_t = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            for w, g, m, v in zip(weights, grads, means, variances):
                m *= 0.9
                m += 0.1 * g
                v *= 0.999
                v += 0.001 * g * g
                w -= lr_t * m / (np.sqrt(v) + 1e-8)
    return step, lambda: None


def mxkit_updater(shapes: list, optimizer: str, aggregated: bool):
    from mxkit import mx

    weights = [mx.nd.array(a) for a in _arrays(shapes, 0)]
    grads = [mx.nd.array(a) for a in _arrays(shapes, 1)]
    updater = mx.optimizer.get_updater(mx.optimizer.create(optimizer, **OPTIMIZERS[optimizer]))
    indices = list(range(len(shapes)))
    if aggregated:
        def step() -> None:
            updater(indices, grads, weights)
    else:
        def step() -> None:
            for i, (g, w) in enumerate(zip(grads, weights)):
                updater(i, g, w)
    return step, mx.nd.waitall


_SUBPROCESS_SCRIPT = r"""
import json, sys, time
import numpy as np
framework, shapes, optimizer, kwargs, steps, repeats = json.loads(sys.argv[1])
rng0, rng1 = np.random.default_rng(0), np.random.default_rng(1)
weights0 = [rng0.standard_normal(s).astype("float32") * 0.1 for s in shapes]
grads0 = [rng1.standard_normal(s).astype("float32") * 0.1 for s in shapes]
if framework == "mxnet":
    import mxnet as mx
    weights = [mx.nd.array(a) for a in weights0]
    grads = [mx.nd.array(a) for a in grads0]
    updater = mx.optimizer.get_updater(mx.optimizer.create(optimizer, **kwargs))
    indices = list(range(len(shapes)))
    step = lambda: updater(indices, grads, weights)
    sync = mx.nd.waitall
else:
    import torch
    torch.set_num_threads(1)
    params = [torch.nn.Parameter(torch.from_numpy(a)) for a in weights0]
    for p, g in zip(params, grads0):
        p.grad = torch.from_numpy(g)
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=kwargs["learning_rate"], momentum=kwargs["momentum"],
                              weight_decay=kwargs["wd"])
    else:
        opt = torch.optim.Adam(params, lr=kwargs["learning_rate"])
    step = opt.step
    sync = lambda: None
for _ in range(max(3, steps // 4)):
    step()
sync()
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    best = min(best, (time.perf_counter() - start) / steps)
print(json.dumps({"seconds": best}))
"""


def in_subprocess(interpreter: str | None, framework: str, shapes: list, optimizer: str, steps: int,
                  repeats: int) -> float | None:
    if not interpreter:
        return None
    kwargs = OPTIMIZERS[optimizer]
    argument = json.dumps([framework, shapes, optimizer, kwargs, steps, repeats])
    result = subprocess.run([interpreter, "-c", _SUBPROCESS_SCRIPT, argument], capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def torch_in_process(shapes: list, optimizer: str):
    try:
        import torch
    except ImportError:
        return None
    params = [torch.nn.Parameter(torch.from_numpy(a)) for a in _arrays(shapes, 0)]
    for p, g in zip(params, _arrays(shapes, 1)):
        p.grad = torch.from_numpy(g)
    kw = OPTIMIZERS[optimizer]
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=kw["learning_rate"], momentum=kw["momentum"], weight_decay=kw["wd"])
    else:
        opt = torch.optim.Adam(params, lr=kw["learning_rate"])
    return opt.step, lambda: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"))
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"))
    args = parser.parse_args()

    header = f"{'network':8} {'optimizer':9} {'implementation':20} {'us/step':>9} {'vs numpy':>9} {'vs mxkit agg':>13}"
    print(header)
    print("-" * len(header))
    for network, shapes in NETWORKS.items():
        for optimizer in OPTIMIZERS:
            setups = {"numpy by hand": numpy_by_hand(shapes, optimizer),
                      "mxkit per weight": mxkit_updater(shapes, optimizer, aggregated=False),
                      "mxkit aggregated": mxkit_updater(shapes, optimizer, aggregated=True)}
            torch_setup = torch_in_process(shapes, optimizer)
            if torch_setup is not None:
                setups["PyTorch"] = torch_setup
            seconds: dict = time_interleaved(setups, args.steps, args.repeats)
            if torch_setup is None:
                seconds["PyTorch"] = in_subprocess(args.torch_python, "torch", shapes, optimizer, args.steps,
                                                   args.repeats)
            seconds["MXNet 1.9.1"] = in_subprocess(args.mxnet_python, "mxnet", shapes, optimizer, args.steps,
                                                   args.repeats)
            for name, value in seconds.items():
                if value is None:
                    print(f"{network:8} {optimizer:9} {name:20} {'(not available)':>9}")
                    continue
                print(f"{network:8} {optimizer:9} {name:20} {value * 1e6:9.1f} "
                      f"{value / seconds['numpy by hand']:9.2f} {value / seconds['mxkit aggregated']:13.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
