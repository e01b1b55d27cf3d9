"""Gluon training steps through ``Trainer``: mxkit next to MXNet 1.9.1 Gluon and PyTorch eager.

Rows: an MLP (784-256-128-10, batch 128) and ResNet-18 v1 (thumbnail stem, 10 classes,
batch 8 of 3x32x32), each imperative and hybridized. One step is forward, softmax
cross-entropy, backward and an SGD-with-momentum update, waited for. The same Gluon code
runs on mxkit and (in the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON`` or
``--mxnet-python``) on MXNet 1.9.1; PyTorch runs the same networks eagerly (interpreter
``MXKIT_BENCH_TORCH_PYTHON`` or ``--torch-python``). Without an interpreter a column stays
empty.

Every row of every framework runs in a fresh process, so that its peak memory is its own:
printed are samples/s (best of ``--repeats`` blocks), the peak resident set size over the
process's RSS before the network is built (parameters, gradients, optimizer state,
activations and whatever the framework caches; Linux's ``VmHWM``, reset at that point), and
mxkit's speed over each anchor's; for mxkit's hybridized rows also the bytes of the
executor's memory plan. Nothing here asserts on time or memory.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/gluon.py
"""

from __future__ import annotations

import argparse
import os
import resource
import sys

import numpy as np
from _timing import best_seconds_per_step, run_anchor

SHAPES = {"mlp": (128, (784,)), "resnet18": (8, (3, 32, 32))}


def _gluon_network(mx, model: str):
    from_zoo = mx.gluon.model_zoo.vision
    if model == "resnet18":
        return from_zoo.resnet18_v1(classes=10, thumbnail=True)
    nn = mx.gluon.nn
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(10))
    return net


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def start_peak_rss() -> int:
    """Reset the process's peak RSS to its current RSS (Linux); returns the current RSS in bytes."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM
    except OSError:
        pass
    current = _status_kib("VmRSS")
    return 1024 * current if current is not None else 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss_since(baseline: int) -> int:
    """Bytes of the peak RSS since :func:`start_peak_rss` above that call's RSS."""
    peak = _status_kib("VmHWM")
    peak = 1024 * peak if peak is not None else 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak - baseline


def measure_gluon(framework: str, steps: int, repeats: int, models: list[str],
                  modes: tuple[str, ...] = ("imperative", "hybridized")) -> dict[str, dict]:
    """Samples/s and peak RSS of each ``model/imperative|hybridized`` row under 'mxkit' or
    'mxnet' (the RSS is meaningful for the first row of a process only)."""
    if framework == "mxnet":
        import mxnet as mx
    else:
        from mxkit import mx
    results: dict[str, dict] = {}
    for model in models:
        batch, shape = SHAPES[model]
        rng = np.random.RandomState(0)
        x = mx.nd.array(rng.rand(batch, *shape).astype(np.float32))
        y = mx.nd.array(rng.randint(0, 10, size=batch).astype(np.float32))
        mx.nd.waitall()
        for hybridize in [mode == "hybridized" for mode in modes]:
            baseline = start_peak_rss()
            net = _gluon_network(mx, model)
            net.initialize(mx.init.Xavier())
            if hybridize:
                net.hybridize(static_alloc=True, static_shape=True)
            trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
            loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()

            def step(net=net, trainer=trainer, loss_fn=loss_fn, x=x, y=y, batch=batch):
                with mx.autograd.record():
                    loss = loss_fn(net(x), y)
                loss.backward()
                trainer.step(batch)

            seconds = best_seconds_per_step(step, mx.nd.waitall, steps, repeats)
            row = {"samples_per_s": batch / seconds, "peak_rss": peak_rss_since(baseline)}
            if framework == "mxkit" and hybridize:
                plan = net.memory_plan()
                row["plan_bytes"] = sum(p.size for p in plan.pools)
            results[f"{model}/{'hybridized' if hybridize else 'imperative'}"] = row
    return results


def measure_torch(steps: int, repeats: int, models: list[str]) -> dict[str, dict]:
    """Samples/s of the same networks in PyTorch eager mode (the ``imperative`` rows)."""
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                      nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if cin != cout else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.down(x))

    def resnet18_thumbnail():
        layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False)]
        channels = [64, 64, 128, 256, 512]
        for i in range(4):
            layers += [Basic(channels[i], channels[i + 1], 1 if i == 0 else 2), Basic(channels[i + 1],
                                                                                       channels[i + 1], 1)]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
        return nn.Sequential(*layers)

    results: dict[str, dict] = {}
    for model in models:
        batch, shape = SHAPES[model]
        rng = np.random.RandomState(0)
        x = torch.from_numpy(rng.rand(batch, *shape).astype(np.float32))
        y = torch.from_numpy(rng.randint(0, 10, size=batch))
        baseline = start_peak_rss()
        if model == "mlp":
            net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        else:
            net = resnet18_thumbnail()  # as Gluon's resnet18_v1(thumbnail=True)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(net=net, optimizer=optimizer, loss_fn=loss_fn, x=x, y=y):
            optimizer.zero_grad()
            loss_fn(net(x), y).backward()
            optimizer.step()

        seconds = best_seconds_per_step(step, lambda: None, steps, repeats)
        results[f"{model}/imperative"] = {"samples_per_s": batch / seconds, "peak_rss": peak_rss_since(baseline)}
    return results


_ROW_SCRIPT = """
import json, sys
sys.path.insert(0, {folder!r})
import gluon as bench
framework, steps, repeats, model, mode = json.loads(sys.argv[1])
if framework == "torch":
    print("RESULT " + json.dumps(bench.measure_torch(steps, repeats, [model])))
else:
    print("RESULT " + json.dumps(bench.measure_gluon(framework, steps, repeats, [model], (mode,))))
"""


def _mib(value: int | None) -> str:
    return f"{value / 2**20:.1f}" if value is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"))
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"))
    args = parser.parse_args()
    folder = os.path.dirname(os.path.abspath(__file__))
    script = _ROW_SCRIPT.format(folder=folder)
    interpreters = {"mxkit": sys.executable, "mxnet": args.mxnet_python, "torch": args.torch_python}
    rows: dict[str, dict[str, dict]] = {}
    for model in args.models.split(","):
        for mode in ("imperative", "hybridized"):
            row = f"{model}/{mode}"
            # the frameworks of one row one after the other, so that a neighbour's load hits them alike
            for framework, interpreter in interpreters.items():
                if framework == "torch" and mode == "hybridized":
                    continue  # eager only: the hybridized rows compare with the imperative PyTorch row
                found = run_anchor(interpreter, script, [framework, args.steps, args.repeats, model, mode])
                rows.setdefault(row, {})[framework] = found.get(row)
    header = (f"{'row':20} {'mxkit samples/s':>15} {'RSS MiB':>8} {'MXNet 1.9.1':>11} {'RSS MiB':>8} "
              f"{'mxkit/MXNet':>11} {'PyTorch eager':>13} {'RSS MiB':>8} {'mxkit/PyTorch':>13} {'plan bytes':>11}")
    print(header)
    for row, by_framework in rows.items():
        ours = by_framework.get("mxkit")
        if ours is None:
            continue
        speed = ours["samples_per_s"]
        cells = [f"{speed:15.1f}", f"{_mib(ours.get('peak_rss')):>8}"]
        torch_row = rows.get(f"{row.split('/')[0]}/imperative", {}).get("torch")
        for other, width in ((by_framework.get("mxnet"), 11), (torch_row, 13)):
            if other:
                cells += [f"{other['samples_per_s']:{width}.1f}", f"{_mib(other.get('peak_rss')):>8}",
                          f"{speed / other['samples_per_s']:{width}.2f}"]
            else:
                cells += [f"{'-':>{width}}", f"{'-':>8}", f"{'-':>{width}}"]
        plan = ours.get("plan_bytes")
        print(f"{row:20} {' '.join(cells)} {plan if plan else '-':>11}")


if __name__ == "__main__":
    main()
