"""Peak RSS and seconds per batch of real networks on the CPU, as a user sees them: mxkit with and
without its oneDNN kernels, next to MXNet 1.9.1 and PyTorch, each run in a fresh process; and,
for mxkit, where its peak went, against the bytes it accounts for.

Networks are the zoo graphs exported from MXNet 1.9.1 (benchmarks/zoo/*-symbol.json: ResNet-50
v1, VGG-16, Inception-v3), bound with ``Module`` on the CPU. Two settings: prediction at
batch 32 (``forward(is_train=False)`` and the output read back) and a training step at batch 16
(a ``SoftmaxOutput`` head, forward, backward, SGD update, the loss read back). Each (framework,
network, setting) runs in its own subprocess (benchmarks/_memory_real_worker.py; PyTorch's below):
one warm-up batch, then ``--repeats`` timed batches (the best counts: the machine may be shared),
each ending when everything it pushed has run. Beside the seconds per batch, the CPU seconds the
process spent on it (all its threads): on a machine shared with other load the wall time is mostly
the scheduler's, the CPU time much less so; it counts a thread that spins waiting for work (OpenMP's
default in MXNet's and PyTorch's processes; mxkit loads oneDNN's with passive waiting) as busy.

- **mxkit**: this interpreter; ``mxkit+oneDNN`` with the mxkit-onednn plugin as installed,
  ``mxkit-cpu`` with ``MXKIT_ONEDNN_DISABLE=1`` (mxkit-cpu's own kernels).
- **MXNet 1.9.1**: the same Module code in the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON``.
- **PyTorch**: ResNet-50 v1 written in ``torch.nn`` (the zoo graph's layers), in the interpreter
  named by ``MXKIT_BENCH_TORCH_PYTHON``; the other networks are left empty for it.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/memory_real.py --networks resnet50_v1

The first table gives, per run, ``peak RSS / peak above the baseline / seconds / CPU seconds per batch``. The
**peak** is the process's peak resident memory over the whole run (warm-up, data and weights
included). The **baseline** is the resident memory after the imports and one tiny convolution
(which loads the kernel libraries, oneDNN's included), before any network: the interpreter, numpy
and the framework. The peak above it is the **runtime peak**, what running the network costs;
the frameworks are compared on it like with like.

The second table takes mxkit's runs apart (MB):

- ``base``: the baseline; ``runtime``: the runtime peak.
- ``account``, mxkit's **accounted bytes**, the sum of: ``plan`` (the executors' memory pools, where
  the planner placed every intermediate), ``arrays`` (the bound arguments, data and labels
  included, gradients, auxiliary states, outputs, and the Module's host copies of the
  parameters), ``optim`` (the optimizer's states), ``batch`` (the caller's batch arrays),
  ``wspace`` (mxkit-onednn's workspace buffers: operands reordered into oneDNN's layouts,
  scratchpads) and ``scratch`` (mxkit-cpu's kernels' scratch buffers, reported by the backend's
  ``memory_stats()``), each measured after the timed batches. Memory two parts share counts once.
- ``libs+``: library pages first paged in after the baseline (code the network runs first);
  ``other``: what is resident after the timed batches beyond the baseline, the accounted bytes
  and ``libs+`` (the C libraries' own heaps: oneDNN's primitives and generated code, OpenMP's
  threads, Python's objects, malloc's free lists); ``step+``: the peak of the timed batches above
  what is resident after them; ``warm+``: how much higher the warm-up batch peaked (the first call
  of each shape times oneDNN's candidates against mxkit-cpu's kernel, whose scratch then exists
  beside oneDNN's workspace).
- ``run/acc``: runtime peak / accounted bytes (the plan is the truth when it is at most 1.10);
  ``code/acc``: the same with ``libs+`` counted in the baseline (library code is part of the
  imports, paged in when first run: only file-backed pages count there, no data of mxkit's);
  ``pk/b+a``: peak / (baseline + accounted).
- With the traced batch (off with ``--no-instrument``): ``np.tmp``, the most numpy memory (and
  Python objects) live at once during one steady-state batch beyond what was live before it,
  as tracemalloc counts it; ``allocs``, the arrays the CPU backend made during it (0: every
  array a step uses was allocated by the bind); ``mfree``, what glibc's malloc holds free in its
  arenas afterwards (fragmentation).

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

WORKER = Path(__file__).resolve().parent / "_memory_real_worker.py"

TORCH_WORKER = r'''
import json, resource, sys, time
import torch
from torch import nn
job = json.loads(sys.argv[1])
torch.manual_seed(0)
nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 3, 3))  # the baseline: torch and its kernels loaded
baseline = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmRSS:"))

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
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("RESULT " + json.dumps({"seconds": min(times), "cpu_seconds": min(cpu_times), "peak": peak,
                             "baseline": baseline}))
'''


def run_worker(python: str, code: str | Path, job: dict, env: dict | None = None, timeout: int = 1800) -> dict | None:
    command = [python, str(code)] if isinstance(code, Path) else [python, "-c", code]
    try:
        done = subprocess.run([*command, json.dumps(job)], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        print(f"{job['framework']} {job['network']} {job['setting']}: timed out", file=sys.stderr)
        return None
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"{job['framework']} {job['network']} {job['setting']} failed:\n{done.stderr[-1500:]}", file=sys.stderr)
    return None


MB = 1 << 20


def cell(result: dict | None) -> str:
    """``peak / peak above baseline / seconds / CPU seconds`` of one run, or a dash."""
    if result is None:
        return "-"
    return (f"{result['peak'] / MB:.0f} / {(result['peak'] - result['baseline']) / MB:.0f} / "
            f"{result['seconds']:.2f}s / {result['cpu_seconds']:.2f}c")


def accounted_total(result: dict) -> int:
    return sum(result["accounted"].values())


def decomposition(name: str, result: dict) -> str:
    """One row of the second table: where an mxkit run's peak went."""
    parts = result["accounted"]
    total = accounted_total(result)
    runtime = result["peak"] - result["baseline"]
    libraries = result.get("library_pages", 0)
    other = result["rest"] - result["baseline"] - total - libraries
    transient = (result["steady_peak"] - result["rest"]) if result.get("steady_peak") else 0
    warmup = (result["warmup_peak"] - max(result["steady_peak"], result["rest"])) if result.get("warmup_peak") else 0
    fields = [result["baseline"], parts["plan"], parts["arrays"], parts["optimizer"], parts["batch"],
              parts["workspace"], parts["scratch"], total, runtime, libraries, other, transient, warmup]
    outside = result.get("outside")
    extra = (f"{outside['numpy_peak'] / MB:>8.1f}{outside['backend_count']:>7}{outside['malloc_free'] / MB:>7.1f}"
             if outside else f"{'-':>8}{'-':>7}{'-':>7}")
    return (f"{name:<34}" + "".join(f"{value / MB:>8.0f}" for value in fields)
            + f"{runtime / total:>8.2f}{(runtime - max(libraries, 0)) / total:>9.2f}"
            + f"{result['peak'] / (result['baseline'] + total):>8.2f}" + extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--repeats", type=int, default=3, help="timed batches per run (best reported)")
    parser.add_argument("--settings", nargs="+", default=[s for s, _ in SETTINGS], choices=[s for s, _ in SETTINGS])
    parser.add_argument("--columns", nargs="+", help="only these columns (names as printed)")
    parser.add_argument("--no-instrument", action="store_true",
                        help="skip the traced batch that measures allocations outside the plan")
    args = parser.parse_args()
    mxnet = os.environ.get("MXKIT_BENCH_MXNET_PYTHON")
    torch = os.environ.get("MXKIT_BENCH_TORCH_PYTHON")
    columns = [("mxkit+oneDNN", sys.executable, WORKER, "mxkit", {}),
               ("mxkit-cpu", sys.executable, WORKER, "mxkit", {"MXKIT_ONEDNN_DISABLE": "1"}),
               ("MXNet 1.9.1", mxnet, WORKER, "mxnet", {"MXNET_SUBGRAPH_BACKEND": "NONE"}),
               ("PyTorch", torch, TORCH_WORKER, "torch", {})]
    if args.columns:
        columns = [column for column in columns if column[0] in args.columns]
    print(f"peak RSS / peak above the baseline (MB) / seconds / CPU seconds (c) per batch, best of {args.repeats}; "
          f"{os.cpu_count()} CPUs; each run a fresh process")
    print(f"{'network':<14}{'setting':<12}" + "".join(f"{name:>34}" for name, *_ in columns))
    accounted_rows = []
    for network in args.networks:
        for setting, batch in SETTINGS:
            if setting not in args.settings:
                continue
            cells = []
            for name, python, code, framework, env in columns:
                result = None
                if python and not (framework == "torch" and network != "resnet50_v1"):
                    job = {"framework": framework, "network": network, "setting": setting, "batch": batch,
                           "size": NETWORKS[network], "graph": str(ZOO / f"{network}-symbol.json"),
                           "repeats": args.repeats, "instrument": not args.no_instrument}
                    result = run_worker(python, code, job, env)
                if result is not None and "accounted" in result:
                    accounted_rows.append((f"{network} {setting} {batch} {name}", result))
                cells.append(cell(result))
            print(f"{network:<14}{f'{setting} {batch}':<12}" + "".join(f"{c:>34}" for c in cells), flush=True)
    if accounted_rows:
        print()
        print("mxkit's accounted bytes against its runtime peak (MB; see the module's docstring for each column)")
        print(f"{'run':<34}" + "".join(f"{h:>8}" for h in (
            "base", "plan", "arrays", "optim", "batch", "wspace", "scratch", "account", "runtime", "libs+",
            "other", "step+", "warm+", "run/acc")) + f"{'code/acc':>9}"
            + "".join(f"{h:>8}" for h in ("pk/b+a", "np.tmp")) + "".join(f"{h:>7}" for h in ("allocs", "mfree")))
        for name, result in accounted_rows:
            print(decomposition(name, result))


if __name__ == "__main__":
    main()
