"""The memory plans of MXNet 1.9.1's Gluon model zoo against MXNet's own plans for them.

benchmarks/zoo holds the networks as MXNet exported them and MXNet's ``debug_str()`` totals
(whole MiB, rounded down) for training at batch 128 and prediction at batches 128 and 1,
written by benchmarks/zoo/export_zoo.py. The default planner must need no more than
MXNet on each of them, and ``greedy`` must stay within 5% of the lower bound.
"""

import json
from pathlib import Path

import pytest
from mxkit import symbol as sym

ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"
MXNET = json.loads((ZOO / "mxnet_memory.json").read_text())["networks"]
CASES = [(name, setting, batch) for name in MXNET for setting, batch in (("train", 128), ("predict", 128),
                                                                          ("predict", 1))]


@pytest.mark.parametrize(("name", "setting", "batch"), CASES, ids=[f"{n}-{s}{b}" for n, s, b in CASES])
def test_default_plan_needs_no_more_than_mxnet_and_greedy_is_near_the_bound(name, setting, batch):
    net = sym.load(str(ZOO / f"{name}-symbol.json"))
    side = MXNET[name]["input"][-1]
    shapes = {"data": (batch, 3, side, side)}
    training = setting == "train"
    if training:
        net = sym.SoftmaxOutput(net, name="softmax")
        shapes["softmax_label"] = (batch,)
    auto = net.plan_memory(for_training=training, memplan="auto", **shapes)
    greedy = net.plan_memory(for_training=training, memplan="greedy", **shapes)
    mxnet_mib = MXNET[name][f"{setting}_{batch}"]
    # MXNet prints whole MiB rounded down: its plan is below mxnet_mib + 1
    assert auto.total_bytes < (mxnet_mib + 1) * 2**20, (auto.total_bytes / 2**20, mxnet_mib)
    assert greedy.total_bytes <= 1.05 * greedy.lower_bound_bytes
