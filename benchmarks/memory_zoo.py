"""Training memory of standard networks per memory-planning strategy, with ``sublinear``.

Run: ``python benchmarks/memory_zoo.py`` (``--quick``: ResNet-50 only, no step timing;
``--zoo-only``: the model-zoo table only).

First the model-zoo table (benchmarks/_zoo_table.py): AlexNet, VGG-16, ResNet-50,
ResNet-152, Inception-v3, MobileNet-1.0 and DenseNet-121 as exported by MXNet 1.9.1, every
strategy, training at batch 128 and prediction at batches 128 and 1, next to MXNet's own
plan and the lower bound. Then the recomputation rows below.

Every figure comes from planning alone (``mxkit.symbol.binding.training_memory``): nothing
is allocated, so ResNet-152 at batch 128 (about 30 GB without recomputation) is measured
on any machine. A row's total is what ``simple_bind`` would allocate: the planned
intermediates plus arguments (data, labels, weights), their gradients, auxiliary states
and outputs. Anchors side by side: the default strategy (``auto``) of the same network,
and for ResNet-152 at batch 128 MXNet 1.9.1's default training plan, 22261 MB of
intermediates (``debug_str``'s Total, which counts no argument or gradient; the ``x MXNet``
column compares planned bytes with it; the target for ``sublinear`` is at most a third).
``sublinear`` appears twice: with Chen's segments
(config ``mirror_policy = "sqrt"``, the default) and with MXNet's ``cheap`` policy (keep
convolution outputs, recompute the rest: ``sublinear/cheap``).

Then the price: the extra step time of ``sublinear`` (forward and backward, recomputing
in backward) against ``auto`` on ResNet-50 at a small batch on the CPU, best of
``--repeats`` interleaved steps (target: under 35% more).

The networks are MXNet's ``example/image-classification/symbols/resnet.py`` (version 2,
pre-activation bottleneck units: BN, ReLU, convolution three times, units 3-4-6-3 for 50
layers and 3-8-36-3 for 152) and the original post-activation layout (version 1:
convolution, BN, ReLU, the sum then ReLU; as in MXNet's Gluon ``resnet152_v1``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _zoo_table import zoo_table
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.symbol.binding import training_memory

# (strategy, mirror_policy): sublinear twice, with Chen's segments and with MXNet's 'cheap' policy
ROWS = (("none", None), ("inplace", None), ("coshare", None), ("mxnet", None), ("greedy", None), ("auto", None),
        ("sublinear", "sqrt"), ("sublinear", "cheap"))
DEFAULT = "auto"
UNITS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
FILTERS = (256, 512, 1024, 2048)
# MXNet 1.9.1, ResNet-152 training at batch 128, default memory planning (MB), as measured for the issue
MXNET_RESNET152_B128_MB = 22261


def _bn(data, name):
    return sym.BatchNorm(data, fix_gamma=False, eps=2e-5, momentum=0.9, name=name)


def _relu(data, name):
    return sym.Activation(data, act_type="relu", name=name)


def _conv(data, filters, kernel, stride, name):
    pad = (kernel // 2, kernel // 2)
    return sym.Convolution(data, num_filter=filters, kernel=(kernel, kernel), stride=(stride, stride), pad=pad,
                           no_bias=True, name=name)


def _unit_v2(data, filters, stride, dim_match, name):
    """MXNet's ``residual_unit`` with ``bottle_neck=True``: pre-activation."""
    act1 = _relu(_bn(data, f"{name}_bn1"), f"{name}_relu1")
    conv1 = _conv(act1, filters // 4, 1, 1, f"{name}_conv1")
    act2 = _relu(_bn(conv1, f"{name}_bn2"), f"{name}_relu2")
    conv2 = _conv(act2, filters // 4, 3, stride, f"{name}_conv2")
    act3 = _relu(_bn(conv2, f"{name}_bn3"), f"{name}_relu3")
    conv3 = _conv(act3, filters, 1, 1, f"{name}_conv3")
    shortcut = data if dim_match else _conv(act1, filters, 1, stride, f"{name}_sc")
    return conv3 + shortcut


def _unit_v1(data, filters, stride, dim_match, name):
    """The original bottleneck: conv-BN-ReLU twice, conv-BN, add the shortcut, ReLU."""
    out = _relu(_bn(_conv(data, filters // 4, 1, 1, f"{name}_conv1"), f"{name}_bn1"), f"{name}_relu1")
    out = _relu(_bn(_conv(out, filters // 4, 3, stride, f"{name}_conv2"), f"{name}_bn2"), f"{name}_relu2")
    out = _bn(_conv(out, filters, 1, 1, f"{name}_conv3"), f"{name}_bn3")
    shortcut = data if dim_match else _bn(_conv(data, filters, 1, stride, f"{name}_sc"), f"{name}_sc_bn")
    return _relu(out + shortcut, f"{name}_relu")


def resnet(num_layers: int, version: int = 2, num_classes: int = 1000):
    """ResNet-``num_layers`` (50, 101 or 152) for 224x224 images, bottleneck units."""
    unit = _unit_v2 if version == 2 else _unit_v1
    x = sym.Variable("data")
    if version == 2:
        x = sym.BatchNorm(x, fix_gamma=True, eps=2e-5, momentum=0.9, name="bn_data")
    x = _relu(_bn(_conv(x, 64, 7, 2, "conv0"), "bn0"), "relu0")
    x = sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    for stage, (units, filters) in enumerate(zip(UNITS[num_layers], FILTERS)):
        for i in range(units):
            stride = 2 if stage and not i else 1
            x = unit(x, filters, stride, i > 0, f"stage{stage + 1}_unit{i + 1}")
    if version == 2:
        x = _relu(_bn(x, "bn1"), "relu1")
    x = sym.Pooling(x, global_pool=True, kernel=(7, 7), pool_type="avg", name="pool1")
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=num_classes, name="fc1")
    return sym.SoftmaxOutput(x, name="softmax")


def recomputed_ops(plan) -> int:
    """Operators the plan runs again (not counting the copies of BatchNorm's moving statistics
    that a recomputed BatchNorm updates instead of the real ones)."""
    return sum(1 for name in plan.recompute if name.endswith("_mirror"))


def mb(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def memory_rows(networks) -> None:
    header = (f"{'network':<16} {'batch':>5} {'strategy':<15} {'planned MB':>11} {'total MB':>9} "
              f"{'x default':>9} {'x MXNet':>8} {'recomputed':>10} {'plan s':>7}")
    print(header)
    print("-" * len(header))
    for label, net, batch, anchor_mb in networks:
        shapes = {"data": (batch, 3, 224, 224)}
        results = {}
        for strategy, policy in ROWS:
            started = time.perf_counter()
            with config.override(mirror_policy=policy or "sqrt"):
                report = training_memory(net, memplan=strategy, shapes=shapes)
            results[strategy if policy in (None, "sqrt") else f"{strategy}/{policy}"] = (
                report, time.perf_counter() - started)
        default = results[DEFAULT][0].total_bytes
        for strategy, (report, seconds) in results.items():
            total = report.total_bytes
            # MXNet's figure (debug_str's Total) counts the planned intermediates only
            versus_mxnet = f"{report.planned / 2**20 / anchor_mb:.3f}" if anchor_mb else ""
            print(f"{label:<16} {batch:>5} {strategy:<15} {mb(report.planned):>11} {mb(total):>9} "
                  f"{total / default:>9.3f} {versus_mxnet:>8} {recomputed_ops(report.plan):>10} {seconds:>7.2f}")
        if anchor_mb:
            print(f"{label:<16} {batch:>5} {'MXNet 1.9.1':<15} {anchor_mb:>11,} {'':>9} "
                  f"{'':>9} {1.0:>8.3f} {'':>10} {'':>7}")


def _fill(exe, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for name, array in exe.arg_dict.items():
        if name.endswith("label"):
            array[:] = rng.integers(0, 1000, size=array.shape)
        else:
            array[:] = rng.normal(scale=0.05, size=array.shape)
    for name, array in exe.aux_dict.items():
        array[:] = 1.0 if name.endswith("var") else 0.0


def step_time(net, batch: int, repeats: int) -> None:
    """Best forward+backward time of ``auto`` and ``sublinear``, steps interleaved."""
    executors = {}
    for strategy in (DEFAULT, "sublinear"):
        executors[strategy] = net.simple_bind(None, memplan=strategy, data=(batch, 3, 224, 224))
        _fill(executors[strategy])
    best = dict.fromkeys(executors, float("inf"))
    for round_ in range(repeats + 1):
        for strategy, exe in executors.items():
            started = time.perf_counter()
            exe.forward(is_train=True)
            exe.backward()
            nd.waitall()
            if round_:   # the first round warms up
                best[strategy] = min(best[strategy], time.perf_counter() - started)
    # both ran the same steps on the same arguments: recomputation must not change a gradient
    difference = max(float(np.max(np.abs(grad.asnumpy() - executors["sublinear"].grad_dict[name].asnumpy())))
                     for name, grad in executors[DEFAULT].grad_dict.items())
    forward_nodes = len(executors["sublinear"]._graph.forward_nodes)
    recomputed = recomputed_ops(executors["sublinear"].memory_plan)
    header = f"{'network':<16} {'batch':>5} {'strategy':<10} {'step s':>8} {'x default':>9} {'planned MB':>11}"
    print(header)
    print("-" * len(header))
    for strategy, exe in executors.items():
        print(f"{'ResNet-50 v2':<16} {batch:>5} {strategy:<10} {best[strategy]:>8.3f} "
              f"{best[strategy] / best[DEFAULT]:>9.3f} {mb(exe.memory_plan.total_bytes):>11}")
    print(f"sublinear recomputes {recomputed} nodes for {forward_nodes} forward nodes; "
          f"extra step time {100 * (best['sublinear'] / best[DEFAULT] - 1):+.1f}% (target: under +35%); "
          f"largest gradient difference to {DEFAULT}: {difference:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="ResNet-50 only, no step timing")
    parser.add_argument("--batch", type=int, default=128, help="batch of the memory rows (default 128)")
    parser.add_argument("--step-batch", type=int, default=2, help="batch of the step-time rows (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per strategy (default 3)")
    parser.add_argument("--zoo-only", action="store_true", help="only the model-zoo table")
    args = parser.parse_args()
    zoo_table(os.environ.get("MXKIT_BENCH_MXNET_PYTHON"), ["resnet50_v1", "vgg16"] if args.quick else None)
    if args.zoo_only:
        return
    print()
    anchor = MXNET_RESNET152_B128_MB if args.batch == 128 else None
    networks = [("ResNet-50 v2", resnet(50, 2), args.batch, None)]
    if not args.quick:
        networks += [("ResNet-50 v1", resnet(50, 1), args.batch, None),
                     ("ResNet-152 v2", resnet(152, 2), args.batch, anchor),
                     ("ResNet-152 v1", resnet(152, 1), args.batch, anchor)]
    print("Training memory by planning only (MB = 2**20 bytes; total = planned + arguments, gradients, "
          "auxiliary states, outputs)")
    memory_rows(networks)
    if not args.quick:
        print()
        print(f"Step time on the CPU (forward + backward, best of {args.repeats})")
        step_time(resnet(50, 2), args.step_batch, args.repeats)


if __name__ == "__main__":
    main()
