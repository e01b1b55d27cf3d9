"""Samples per second of a full SGD training step: mxkit Module vs PyTorch CPU vs MXNet 1.9.1 Module.

Two networks on synthetic MNIST-shaped data (1x28x28 images, 10 classes), batch 128:

- **MLP** 784-128-64-10 (ReLU);
- **LeNet**: conv 20x5x5, tanh, maxpool 2, conv 50x5x5, tanh, maxpool 2, fc 500, tanh, fc 10.

One step is what ``Module.fit`` does per batch: copy the batch in, forward, backward
(softmax cross-entropy), and an SGD update with momentum 0.9 and weight decay of every
parameter. Rows:

- **mxkit Module** in a subprocess of this interpreter (``mx.mod.Module`` on ``cpu(0)`` with mxkit's
  defaults: BLAS on one thread beside the engine's workers, config ``cpu_blas_threads``);
- **PyTorch** CPU (``nn.Sequential``, ``torch.optim.SGD``), in a subprocess of the interpreter
  named by ``MXKIT_BENCH_TORCH_PYTHON`` (or ``--torch-python``; this interpreter when it imports torch);
- **MXNet 1.9.1** ``mx.mod.Module`` in a subprocess of ``MXKIT_BENCH_MXNET_PYTHON`` (or ``--mxnet-python``).

With ``--autograd`` a second row per network times the same step written imperatively: the
layers as ``mx.nd`` calls under ``mx.autograd.record()``, ``SoftmaxOutput``'s gradient from
``out.backward()``, and the same SGD with momentum and weight decay through
``mx.optimizer.get_updater`` over the list of parameters (one aggregated update, as Gluon's
``Trainer`` calls it); MXNet 1.9.1 runs the same code, PyTorch its own eager step.

With ``--metric`` every step also counts the batch's accuracy, as ``Module.fit`` does
(``update_metric`` with ``mx.metric.Accuracy``, read once per timed block as a log line
would; PyTorch adds ``(scores.argmax(1) == label).sum().item()``).

With ``--fit`` the mxkit and MXNet columns time ``Module.fit`` itself instead of a hand-written
loop: one call over an ``NDArrayIter`` of ``--steps`` batches per epoch, ``--repeats`` epochs
after a warm-up epoch, each epoch timed from one ``epoch_end_callback`` to the next (so it
includes the iterator, the accuracy metric ``fit`` keeps, and the end-of-epoch parameter
sync). mxkit's ``fit`` replays a step prepared once (``module_step_program``); PyTorch runs
its own loop with the accuracy count, as with ``--metric``.

Each row is the best of ``--repeats`` timed blocks of ``--steps`` steps after a warm-up, each
row of each framework in a fresh process: a process that has run oneDNN on one thread (the
engine's worker, for ``Module``) and then runs it on another (the caller, where the imperative
row's small operations run) has two OpenMP teams, and libgomp then shortens every team's
spin-wait for good, which cost the second row 20-35% when both shared a process.
With ``--rounds N`` every system and row runs N times in turn, each time in a fresh process, and
each cell is its best: on a shared machine a slow spell lasts seconds to minutes and slows
whatever runs during it (its processes use more CPU time for the same work), so one process
per system compares the spells more than the systems.
A missing anchor leaves its column empty. Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=... MXKIT_BENCH_TORCH_PYTHON=... python benchmarks/training.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from _timing import best_seconds_per_step

BATCH, CLASSES, LR, MOMENTUM, WD = 128, 10, 0.01, 0.9, 1e-4
NETWORKS = ("mlp", "lenet")


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, 1, 28, 28)).astype("float32")
    y = rng.integers(0, CLASSES, BATCH).astype("float32")
    return x, y


def _symbol(mx, network: str):
    data = mx.sym.Variable("data")
    if network == "mlp":
        net = mx.sym.Flatten(data)
        net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=128, name="fc1"), act_type="relu")
        net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=64, name="fc2"), act_type="relu")
        net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc3")
    else:
        net = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
        net = mx.sym.Pooling(mx.sym.Activation(net, act_type="tanh"), pool_type="max", kernel=(2, 2), stride=(2, 2))
        net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=50, name="conv2")
        net = mx.sym.Pooling(mx.sym.Activation(net, act_type="tanh"), pool_type="max", kernel=(2, 2), stride=(2, 2))
        net = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=500, name="fc1"),
                                act_type="tanh")
        net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def module_step(mx, network: str, metric: bool = False):
    """``(step, sync)`` of an MXNet-API Module (runs under mxkit and under MXNet 1.9.1 alike);
    with ``metric``, each step also updates an accuracy metric as ``Module.fit`` does, and the
    sync reads it (a log line)."""
    x, y = _data()
    module = mx.mod.Module(_symbol(mx, network), context=mx.cpu(0))
    module.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)])
    module.init_params(mx.init.Xavier(magnitude=2.0))
    module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": LR, "momentum": MOMENTUM, "wd": WD})
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)])

    if not metric:
        def step() -> None:
            module.forward_backward(batch)
            module.update()

        return step, mx.nd.waitall
    accuracy = mx.metric.create("acc")

    def step_with_metric() -> None:
        module.forward_backward(batch)
        module.update()
        module.update_metric(accuracy, batch.label)

    def read_metric() -> None:
        mx.nd.waitall()
        accuracy.get()

    return step_with_metric, read_metric


def autograd_step(mx, network: str):
    """``(step, sync)`` of the NDArray + autograd step (MXNet-API: runs under mxkit and MXNet 1.9.1
    alike): ``mx.nd`` layers recorded by ``mx.autograd``, ``backward()``, and the momentum SGD of
    ``Module``'s step through an updater over every parameter at once."""
    x, y = _data()
    rng = np.random.default_rng(1)

    def weight(*shape):
        fan_in = int(np.prod(shape[1:]))
        return mx.nd.array((rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype("float32"))

    if network == "mlp":
        shapes = [(128, 784), (128,), (64, 128), (64,), (CLASSES, 64), (CLASSES,)]
    else:
        shapes = [(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (500, 800), (500,), (CLASSES, 500), (CLASSES,)]
    params = [weight(*shape) if len(shape) > 1 else mx.nd.zeros(shape) for shape in shapes]
    for param in params:
        param.attach_grad()
    data, label = mx.nd.array(x), mx.nd.array(y)
    optimizer = mx.optimizer.SGD(learning_rate=LR, momentum=MOMENTUM, wd=WD, rescale_grad=1.0 / BATCH)
    updater = mx.optimizer.get_updater(optimizer)
    indices = list(range(len(params)))
    nd = mx.nd

    def forward():
        if network == "mlp":
            h = nd.Flatten(data)
            h = nd.Activation(nd.FullyConnected(h, params[0], params[1], num_hidden=128), act_type="relu")
            h = nd.Activation(nd.FullyConnected(h, params[2], params[3], num_hidden=64), act_type="relu")
            return nd.FullyConnected(h, params[4], params[5], num_hidden=CLASSES)
        h = nd.Convolution(data, params[0], params[1], kernel=(5, 5), num_filter=20)
        h = nd.Pooling(nd.Activation(h, act_type="tanh"), pool_type="max", kernel=(2, 2), stride=(2, 2))
        h = nd.Convolution(h, params[2], params[3], kernel=(5, 5), num_filter=50)
        h = nd.Pooling(nd.Activation(h, act_type="tanh"), pool_type="max", kernel=(2, 2), stride=(2, 2))
        h = nd.Activation(nd.FullyConnected(nd.Flatten(h), params[4], params[5], num_hidden=500), act_type="tanh")
        return nd.FullyConnected(h, params[6], params[7], num_hidden=CLASSES)

    def step() -> None:
        with mx.autograd.record():
            out = nd.SoftmaxOutput(forward(), label)
        out.backward()
        updater(indices, [param.grad for param in params], params)

    return step, mx.nd.waitall


def module_fit_seconds(mx, network: str, steps: int, repeats: int) -> float:
    """Seconds per batch of ``Module.fit`` (MXNet-API: runs under mxkit and MXNet 1.9.1 alike), the
    best of ``repeats`` epochs of ``steps`` batches after one warm-up epoch."""
    import time

    x, y = _data()
    train = mx.io.NDArrayIter(np.concatenate([x] * steps), np.concatenate([y] * steps), batch_size=BATCH)
    module = mx.mod.Module(_symbol(mx, network), context=mx.cpu(0))
    stamps: list[float] = []
    module.fit(train, eval_metric="acc", optimizer="sgd",
               optimizer_params={"learning_rate": LR, "momentum": MOMENTUM, "wd": WD},
               initializer=mx.init.Xavier(magnitude=2.0), num_epoch=repeats + 1,
               epoch_end_callback=lambda *args: stamps.append(time.perf_counter()))
    return min(stamps[i + 1] - stamps[i] for i in range(len(stamps) - 1)) / steps


def torch_step(network: str, metric: bool = False):
    import torch
    from torch import nn

    x, y = _data()
    if network == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, CLASSES))
    else:
        model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.Tanh(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.Tanh(), nn.Linear(500, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    loss_fn = nn.CrossEntropyLoss()
    data, label = torch.from_numpy(x), torch.from_numpy(y).long()

    correct = [0]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        scores = model(data)
        loss_fn(scores, label).backward()
        optimizer.step()
        if metric:  # the accuracy count a PyTorch loop keeps per step
            correct[0] += int((scores.argmax(1) == label).sum().item())

    return step, lambda: None


def _worker(kind: str, network: str, steps: int, repeats: int, threads: int | None, metric: bool,
            fit: bool = False, autograd: bool = False) -> None:
    """Run in an anchor's interpreter: print ``{"seconds": ...}``."""
    if kind == "mxnet" and autograd:
        import mxnet as mx

        step, sync = autograd_step(mx, network)
        print(json.dumps({"seconds": best_seconds_per_step(step, sync, steps, repeats, warmup=max(3, steps // 5))}))
        return
    if kind == "mxnet" and fit:
        import mxnet as mx

        print(json.dumps({"seconds": module_fit_seconds(mx, network, steps, repeats)}))
        return
    if kind == "mxkit":
        print(json.dumps({"seconds": mxkit_seconds(network, steps, repeats, metric, fit, autograd)}))
        return
    if kind == "torch":
        if threads:
            import torch

            torch.set_num_threads(threads)
        step, sync = torch_step(network, metric)
    else:
        import mxnet as mx

        step, sync = module_step(mx, network, metric)
    print(json.dumps({"seconds": best_seconds_per_step(step, sync, steps, repeats, warmup=max(3, steps // 5))}))


def _in_subprocess(python: str | None, kind: str, network: str, steps: int, repeats: int,
                   threads: int | None, metric: bool, fit: bool = False, autograd: bool = False) -> float | None:
    if not python:
        return None
    command = [python, os.path.abspath(__file__), "--worker", kind, "--network", network, "--steps", str(steps),
               "--repeats", str(repeats)] + (["--metric"] if metric else []) + (["--fit"] if fit else []) + \
        (["--autograd"] if autograd else [])
    env = dict(os.environ)
    if threads:
        command += ["--threads", str(threads)]
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    if result.returncode != 0:
        print(f"[{kind} failed: {result.stderr.strip().splitlines()[-1:]}]", file=sys.stderr)
        return None
    return float(json.loads(result.stdout.strip().splitlines()[-1])["seconds"])


def _torch_python(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def mxkit_seconds(network: str, steps: int, repeats: int, metric: bool, fit: bool = False,
                  autograd: bool = False) -> float:
    from mxkit import mx

    if autograd:
        step, sync = autograd_step(mx, network)
        return best_seconds_per_step(step, sync, steps, repeats, warmup=max(3, steps // 5))
    if fit:
        return module_fit_seconds(mx, network, steps, repeats)
    step, sync = module_step(mx, network, metric)
    return best_seconds_per_step(step, sync, steps, repeats, warmup=max(3, steps // 5))


def _mxkit_in_subprocess(network: str, steps: int, repeats: int, metric: bool, fit: bool = False,
                         autograd: bool = False) -> float:
    """:func:`mxkit_seconds` in a fresh process of this interpreter (see the module's docstring)."""
    seconds = _in_subprocess(sys.executable, "mxkit", network, steps, repeats, None, metric, fit, autograd)
    if seconds is None:
        raise SystemExit("the mxkit run failed (its error is above)")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (the best is reported)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every system this many times, in turn, each in a fresh process; each cell is "
                             "its best (the machine's slow spells last seconds to minutes)")
    parser.add_argument("--network", choices=NETWORKS, action="append", help="network(s) to run (default: both)")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"),
                        help="interpreter of an MXNet 1.9.1 environment")
    parser.add_argument("--torch-python", default=os.environ.get("MXKIT_BENCH_TORCH_PYTHON"),
                        help="interpreter of a PyTorch environment")
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads of PyTorch and MXNet (default: theirs; mxkit's BLAS threads are its "
                             "config cpu_blas_threads)")
    parser.add_argument("--metric", action="store_true",
                        help="also update an accuracy metric every step, as Module.fit does (read after each block)")
    parser.add_argument("--fit", action="store_true",
                        help="time Module.fit itself (mxkit, MXNet) over an NDArrayIter, with its accuracy metric")
    parser.add_argument("--autograd", action="store_true",
                        help="also time the step written with mx.nd and mx.autograd (mxkit and MXNet; a row each)")
    parser.add_argument("--worker", choices=("mxkit", "torch", "mxnet"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    networks = args.network or list(NETWORKS)
    if args.worker:
        _worker(args.worker, networks[0], args.steps, args.repeats, args.threads, args.metric, args.fit, args.autograd)
        return 0
    torch_python = _torch_python(args.torch_python)
    threads = f"{args.threads} thread(s) each" if args.threads else "default threads"
    metric = " + accuracy metric per step" if args.metric or args.fit else ""
    if args.fit:
        metric += "; mxkit and MXNet: Module.fit over an NDArrayIter"
    rounds = f"; best of {args.rounds} alternated rounds" if args.rounds > 1 else ""
    print(f"Full SGD step (forward, backward, momentum update{metric}) at batch {BATCH}, MNIST-shaped data; "
          f"samples/s ({threads}, {os.cpu_count()} cores{rounds})")
    header = (f"{'network':<8} {'mxkit Module':>13} {'PyTorch CPU':>12} {'MXNet 1.9.1':>12} "
              f"{'mxkit/PyTorch':>14} {'mxkit/MXNet':>12}")
    print(header)
    print("-" * len(header))
    for network in networks:
        rows = {}  # row label -> [mxkit, PyTorch, MXNet] samples/s, the best over the rounds
        for _ in range(args.rounds):  # whole rounds in turn: a slow spell of the machine hits every system
            for label, values in _one_round(network, args, torch_python).items():
                best = rows.setdefault(label, [None, None, None])
                rows[label] = [v if b is None else b if v is None else max(b, v) for b, v in zip(best, values)]
        for label, (ours, *anchors) in rows.items():
            cells = [f"{v:>12,.0f}" if v else f"{'-':>12}" for v in anchors]
            ratios = [f"{ours / v:>.2f}" if v else "-" for v in anchors]
            print(f"{label:<8} {ours:>13,.0f} {cells[0]} {cells[1]} {ratios[0]:>14} {ratios[1]:>12}")
    print("\nratios are mxkit's samples/s over the anchor's: above 1 is faster than the anchor.")
    if args.autograd:
        print("'<network> ag' rows: mx.nd + mx.autograd steps in mxkit and MXNet 1.9.1 against PyTorch's eager step.")
    return 0


def _one_round(network: str, args: argparse.Namespace, torch_python: str | None) -> dict[str, list]:
    """One subprocess per system and row, in turn: {row label: [mxkit, PyTorch, MXNet] samples/s}."""
    rows = {}
    ours = BATCH / _mxkit_in_subprocess(network, args.steps, args.repeats, args.metric, args.fit)
    anchors = []
    for kind, python in (("torch", torch_python), ("mxnet", args.mxnet_python)):
        seconds = _in_subprocess(python, kind, network, args.steps, args.repeats, args.threads,
                                 args.metric or args.fit, args.fit)
        anchors.append(None if seconds is None else BATCH / seconds)
    rows[network] = [ours, *anchors]
    if args.autograd:  # the same PyTorch step; MXNet's column runs its own autograd step
        ours = BATCH / _mxkit_in_subprocess(network, args.steps, args.repeats, False, autograd=True)
        seconds = _in_subprocess(args.mxnet_python, "mxnet", network, args.steps, args.repeats, args.threads,
                                 False, autograd=True)
        anchors = [anchors[0], None if seconds is None else BATCH / seconds]
        if args.metric or args.fit:  # this row counts no accuracy: neither does its PyTorch step
            seconds = _in_subprocess(torch_python, "torch", network, args.steps, args.repeats, args.threads, False)
            anchors[0] = None if seconds is None else BATCH / seconds
        rows[network + " ag"] = [ours, *anchors]
    return rows


if __name__ == "__main__":
    sys.exit(main())
