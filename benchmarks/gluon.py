"""Gluon training steps through ``Trainer``: mxkit next to MXNet 1.9.1 Gluon and PyTorch eager.

Rows: an MLP (784-256-128-10, batch 128) and ResNet-18 v1 (thumbnail stem, 10 classes,
batch 8 of 3x32x32), each imperative and hybridized. One step is forward, softmax
cross-entropy, backward and an SGD-with-momentum update, waited for. The same Gluon code
runs on mxkit and (in a subprocess of the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON``
or ``--mxnet-python``) on MXNet 1.9.1; PyTorch runs the same networks eagerly (interpreter
``MXKIT_BENCH_TORCH_PYTHON`` or ``--torch-python``). Without an interpreter a column stays
empty. Printed: samples/s (best of ``--repeats`` blocks) and mxkit's speed over each anchor's;
for mxkit's hybridized rows also the bytes of the executor's memory plan. Nothing here
asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/gluon.py
"""

from __future__ import annotations

import argparse
import os

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


def measure_gluon(framework: str, steps: int, repeats: int, models: list[str]) -> dict[str, dict]:
    """Samples/s of each ``model/imperative|hybridized`` row under 'mxkit' or 'mxnet'."""
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
        for hybridize in (False, True):
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
            row = {"samples_per_s": batch / seconds}
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
        if model == "mlp":
            net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        else:
            net = resnet18_thumbnail()  # as Gluon's resnet18_v1(thumbnail=True)
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        rng = np.random.RandomState(0)
        x = torch.from_numpy(rng.rand(batch, *shape).astype(np.float32))
        y = torch.from_numpy(rng.randint(0, 10, size=batch))
        loss_fn = nn.CrossEntropyLoss()

        def step(net=net, optimizer=optimizer, loss_fn=loss_fn, x=x, y=y):
            optimizer.zero_grad()
            loss_fn(net(x), y).backward()
            optimizer.step()

        seconds = best_seconds_per_step(step, lambda: None, steps, repeats)
        results[f"{model}/imperative"] = {"samples_per_s": batch / seconds}
    return results


_ANCHOR_SCRIPT = """
import json, sys
sys.path.insert(0, {folder!r})
import gluon as bench
framework, steps, repeats, models = json.loads(sys.argv[1])
if framework == "torch":
    print("RESULT " + json.dumps(bench.measure_torch(steps, repeats, models)))
else:
    print("RESULT " + json.dumps(bench.measure_gluon(framework, steps, repeats, models)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"))
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"))
    args = parser.parse_args()
    models = args.models.split(",")
    folder = os.path.dirname(os.path.abspath(__file__))
    script = _ANCHOR_SCRIPT.format(folder=folder)
    ours = measure_gluon("mxkit", args.steps, args.repeats, models)
    mxnet = run_anchor(args.mxnet_python, script, ["mxnet", args.steps, args.repeats, models])
    torch = run_anchor(args.torch_python, script, ["torch", args.steps, args.repeats, models])
    print(f"{'row':24} {'mxkit samples/s':>16} {'MXNet 1.9.1':>12} {'mxkit/MXNet':>12} {'PyTorch eager':>14} "
          f"{'mxkit/PyTorch':>14} {'mxkit plan bytes':>17}")
    for row, values in ours.items():
        speed = values["samples_per_s"]
        cells = []
        for anchor in (mxnet, torch):
            model = row.split("/")[0]
            other = anchor.get(row, anchor.get(f"{model}/imperative") if anchor is torch else None)
            other_speed = other["samples_per_s"] if other else None
            cells.append(f"{other_speed:12.1f}" if other_speed else f"{'-':>12}")
            cells.append(f"{speed / other_speed:12.2f}" if other_speed else f"{'-':>12}")
        plan = values.get("plan_bytes")
        print(f"{row:24} {speed:16.1f} {cells[0]} {cells[1]} {cells[2]:>14} {cells[3]:>14} "
              f"{plan if plan else '-':>17}")


if __name__ == "__main__":
    main()
