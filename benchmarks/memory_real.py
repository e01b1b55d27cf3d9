"""Peak RSS and seconds per batch of real networks on the CPU, as a user sees them: mxkit with and
without its oneDNN kernels, next to MXNet 1.9.1 and PyTorch, each run in a fresh process.

Networks are the zoo graphs exported from MXNet 1.9.1 (benchmarks/zoo/*-symbol.json: ResNet-50
v1, VGG-16, Inception-v3), bound with ``Module`` on the CPU. Two settings: prediction at
batch 32 (``forward(is_train=False)`` and the output read back) and a training step at batch 16
(a ``SoftmaxOutput`` head, forward, backward, SGD update, the loss read back). Each (framework,
network, setting) runs in its own subprocess: one warm-up batch, then ``--repeats`` timed batches
(the best counts: the machine may be shared), then the process's peak RSS
(``getrusage``, which includes the warm-up, data and weights). Beside the seconds per batch, the CPU
seconds the process spent on it (all its threads): on a machine shared with other load the wall time
is mostly the scheduler's, the CPU time much less so; it counts a thread that spins waiting for work
(OpenMP's default in MXNet's and PyTorch's processes; mxkit loads oneDNN's with passive waiting) as busy.

- **mxkit**: this interpreter; ``mxkit+oneDNN`` with the mxkit-onednn plugin as installed,
  ``mxkit-cpu`` with ``MXKIT_ONEDNN_DISABLE=1`` (mxkit-cpu's own kernels).
- **MXNet 1.9.1**: the same Module code in the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON``.
- **PyTorch**: ResNet-50 v1 written in ``torch.nn`` (the zoo graph's layers), in the interpreter
  named by ``MXKIT_BENCH_TORCH_PYTHON``; the other networks are left empty for it.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/memory_real.py --networks resnet50_v1

Nothing here asserts on time or memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo"
NETWORKS = {"resnet50_v1": 224, "vgg16": 224, "inceptionv3": 299}
SETTINGS = (("predict", 32), ("train", 16))
CLASSES = 1000

WORKER = r'''
import json, resource, sys, time
import numpy as np
job = json.loads(sys.argv[1])
if job["framework"] == "mxnet":
    import mxnet as mx
else:
    from mxkit import mx
net = mx.sym.load(job["graph"])
batch, size = job["batch"], job["size"]
rng = np.random.default_rng(0)
data = mx.nd.array(rng.standard_normal((batch, 3, size, size)).astype(np.float32))
label = mx.nd.array(rng.integers(0, 1000, batch).astype(np.float32))
train = job["setting"] == "train"
if train:
    net = mx.sym.SoftmaxOutput(net, name="softmax")
mod = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"] if train else None, context=mx.cpu())
mod.bind(data_shapes=[("data", data.shape)], label_shapes=[("softmax_label", label.shape)] if train else None,
         for_training=train)
mod.init_params(mx.init.Xavier())
if train:
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9})
batch_data = mx.io.DataBatch([data], [label] if train else None)
def step():
    mod.forward(batch_data, is_train=train)
    if train:
        mod.backward()
        mod.update()
    return float(mod.get_outputs()[0].asnumpy().ravel()[0])
step()
times, cpu_times = [], []
for _ in range(job["repeats"]):
    start, cpu = time.perf_counter(), time.process_time()
    step()
    times.append(time.perf_counter() - start)
    cpu_times.append(time.process_time() - cpu)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"seconds": min(times), "cpu_seconds": min(cpu_times), "peak_rss_mb": peak}))
'''

TORCH_WORKER = r'''
import json, resource, sys, time
import torch
from torch import nn
job = json.loads(sys.argv[1])
torch.manual_seed(0)

class Bottleneck(nn.Module):  # ResNet v1 as Gluon's resnet50_v1: the stride on the first 1x1
    def __init__(self, cin, mid, stride, down):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, stride, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, 1, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid * 4, 1, bias=False), nn.BatchNorm2d(mid * 4))
        self.down = (nn.Sequential(nn.Conv2d(cin, mid * 4, 1, stride, bias=False), nn.BatchNorm2d(mid * 4))
                     if down else None)
        self.relu = nn.ReLU(inplace=True)
    def forward(self, x):
        return self.relu(self.body(x) + (self.down(x) if self.down is not None else x))

layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
cin = 64
for units, mid, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
    for u in range(units):
        layers.append(Bottleneck(cin, mid, stride if u == 0 else 1, u == 0))
        cin = mid * 4
layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
model = nn.Sequential(*layers)
batch, size, train = job["batch"], job["size"], job["setting"] == "train"
data = torch.randn(batch, 3, size, size)
label = torch.randint(0, 1000, (batch,))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
model.train(train)
def step():
    if train:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(data), label)
        loss.backward()
        opt.step()
        return float(loss)
    with torch.no_grad():
        return float(model(data)[0, 0])
step()
times, cpu_times = [], []
for _ in range(job["repeats"]):
    start, cpu = time.perf_counter(), time.process_time()
    step()
    times.append(time.perf_counter() - start)
    cpu_times.append(time.process_time() - cpu)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"seconds": min(times), "cpu_seconds": min(cpu_times), "peak_rss_mb": peak}))
'''


def run_worker(python: str, code: str, job: dict, env: dict | None = None, timeout: int = 1200) -> dict | None:
    try:
        done = subprocess.run([python, "-c", code, json.dumps(job)], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        print(f"{job['framework']} {job['network']} {job['setting']}: timed out", file=sys.stderr)
        return None
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"{job['framework']} {job['network']} {job['setting']} failed:\n{done.stderr[-1500:]}", file=sys.stderr)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--repeats", type=int, default=3, help="timed batches per run (best reported)")
    parser.add_argument("--settings", nargs="+", default=[s for s, _ in SETTINGS], choices=[s for s, _ in SETTINGS])
    parser.add_argument("--columns", nargs="+", help="only these columns (names as printed)")
    args = parser.parse_args()
    mxnet = os.environ.get("MXKIT_BENCH_MXNET_PYTHON")
    torch = os.environ.get("MXKIT_BENCH_TORCH_PYTHON")
    columns = [("mxkit+oneDNN", sys.executable, WORKER, "mxkit", {}),
               ("mxkit-cpu", sys.executable, WORKER, "mxkit", {"MXKIT_ONEDNN_DISABLE": "1"}),
               ("MXNet 1.9.1", mxnet, WORKER, "mxnet", {"MXNET_SUBGRAPH_BACKEND": "NONE"}),
               ("PyTorch", torch, TORCH_WORKER, "torch", {})]
    if args.columns:
        columns = [column for column in columns if column[0] in args.columns]
    print(f"peak RSS (MB) / seconds per batch / CPU seconds per batch (c), best of {args.repeats}; "
          f"{os.cpu_count()} CPUs; each run a fresh process")
    print(f"{'network':<14}{'setting':<12}" + "".join(f"{name:>28}" for name, *_ in columns))
    for network in args.networks:
        for setting, batch in SETTINGS:
            if setting not in args.settings:
                continue
            cells = []
            for _name, python, code, framework, env in columns:
                result = None
                if python and not (framework == "torch" and network != "resnet50_v1"):
                    job = {"framework": framework, "network": network, "setting": setting, "batch": batch,
                           "size": NETWORKS[network], "graph": str(ZOO / f"{network}-symbol.json"),
                           "repeats": args.repeats}
                    result = run_worker(python, code, job, env)
                cells.append(f"{result['peak_rss_mb']:>6.0f} / {result['seconds']:>6.2f}s / "
                             f"{result['cpu_seconds']:>6.2f}c" if result else "-")
            print(f"{network:<14}{f'{setting} {batch}':<12}" + "".join(f"{c:>28}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
