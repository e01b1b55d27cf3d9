"""BatchNorm folding on a block of the model zoo's ResNet-50 v1 (benchmarks/zoo, as MXNet 1.9.1
exported it): the stem and the first bottleneck unit with its projection shortcut, predicted
folded and unfolded from the same random parameters. The float32 bound is derived in
packages/mxkit-symbol/tests/test_fold_batchnorm.py: twice the sum over the convolutions of
(K + 8) unit roundoffs, times the network run in float64 on the magnitudes of its inputs.
"""

from math import prod
from pathlib import Path

import numpy as np
from mxkit import symbol as sym
from mxkit.core import config

ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo"
U32 = 2.0 ** -24


def _bind(net, fold, type_dict=None, **shapes):
    with config.override(fold_batchnorm=fold):
        return net.simple_bind(None, grad_req="null", type_dict=type_dict, **shapes)


def _load(exe, values):
    for name, array in list(exe.arg_dict.items()) + list(exe.aux_dict.items()):
        array[:] = values[name]


def test_resnet50_first_unit_folded_matches_unfolded_within_the_bound():
    net = sym.load(str(ZOO / "resnet50_v1-symbol.json")).get_internals()["resnetv10_stage1_activation0_output"]
    shapes = {"data": (3, 3, 64, 64)}  # large enough that every pair folds
    folded, plain = _bind(net, True, **shapes), _bind(net, False, **shapes)
    rng = np.random.default_rng(0)
    values = {}
    for name, array in sorted(plain.arg_dict.items()) + sorted(plain.aux_dict.items()):
        fan_in = prod(array.shape[1:]) if len(array.shape) > 1 else 1
        if name.endswith("_var"):  # Gluon names them running_var
            values[name] = rng.uniform(0.2, 2.0, array.shape)
        else:
            values[name] = rng.standard_normal(array.shape) / np.sqrt(fan_in)
        values[name] = values[name].astype(np.float32)
    _load(folded, values)
    _load(plain, values)
    before = sum(1 for n in plain._graph.forward_nodes if n.op.name == "BatchNorm")
    after = sum(1 for n in folded._graph.forward_nodes if n.op.name == "BatchNorm")
    assert before == 5 and after == 0
    got, want = folded.forward()[0].asnumpy(), plain.forward()[0].asnumpy()

    magnitudes = {n: (-np.abs(v) if n.endswith("_mean") else np.abs(v)).astype(np.float64)
                  for n, v in values.items()}
    magnitude_exe = _bind(net, False, type_dict=dict.fromkeys(net.list_arguments(), "float64"), **shapes)
    _load(magnitude_exe, magnitudes)
    magnitude = magnitude_exe.forward()[0].asnumpy()
    length = sum(prod(plain.arg_dict[n.inputs[1].node.name].shape[1:]) + 8
                 for n in plain._graph.forward_nodes if n.op.name == "Convolution")
    bound = 2 * length * U32 * magnitude
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)
