"""The legacy layers (SoftmaxActivation, L2Normalization, Crop, ROIPooling, SVMOutput) as symbols:
mx.test_utils.check_numeric_gradient through the executor, shape inference and JSON round trips;
and a custom operator's backward against finite differences the same way."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mxkit import mx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "custom"))

import custom_op_defs

custom_op_defs.define(mx)
RNG = np.random.default_rng(17)

CASES = [
    ("SoftmaxActivation", {"mode": "channel"}, {"data": RNG.uniform(-1, 1, (2, 3, 2, 2))}),
    ("SoftmaxActivation", {}, {"data": RNG.uniform(-1, 1, (3, 4))}),
    ("L2Normalization", {"mode": "spatial"}, {"data": RNG.uniform(-1, 1, (2, 2, 3, 2))}),
    ("L2Normalization", {"mode": "instance", "eps": 1e-4}, {"data": RNG.uniform(-1, 1, (2, 5))}),
    ("Crop", {"num_args": 1, "h_w": (2, 2), "offset": (1, 0)}, {"data": RNG.uniform(-1, 1, (1, 2, 4, 3))}),
    ("ROIPooling", {"pooled_size": (2, 2), "spatial_scale": 0.5},
     {"data": RNG.permutation(64).reshape(1, 1, 8, 8) / 10.0,
      "rois": np.array([[0, 0, 0, 9, 9], [0, 4, 2, 14, 8]], dtype=np.float64)}),
]


@pytest.mark.parametrize(("op", "params", "location"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_numeric_gradient(op, params, location):
    variables = [mx.sym.Variable(name) for name in location]
    sym = getattr(mx.sym, op)(*variables, **params)
    data_only = [n for n in location if n == "data"]
    mx.test_utils.check_numeric_gradient(sym, location, grad_nodes=data_only, dtype=np.float64, rtol=1e-4,
                                         atol=1e-6)
    again = mx.sym.load_json(sym.tojson())
    assert again.tojson() == sym.tojson()


def test_shapes_infer_through_the_graph():
    data, rois = mx.sym.Variable("data"), mx.sym.Variable("rois")
    pooled = mx.sym.ROIPooling(data, rois, pooled_size=(3, 4), spatial_scale=0.0625)
    _, out, _ = pooled.infer_shape(data=(2, 16, 20, 20), rois=(7, 5))
    assert out == [(7, 16, 3, 4)]
    crop = mx.sym.Crop(data, mx.sym.Variable("like"), num_args=2, center_crop=True)
    assert crop.list_arguments() == ["data", "like"]
    assert crop.infer_shape(data=(1, 3, 9, 9), like=(1, 1, 4, 5))[1] == [(1, 3, 4, 5)]
    svm = mx.sym.SVMOutput(mx.sym.FullyConnected(data, num_hidden=4, name="fc"), name="svm")
    shapes = dict(zip(svm.list_arguments(), svm.infer_shape(data=(6, 10))[0]))
    assert shapes["svm_label"] == (6,)


def test_svm_output_is_a_loss_head_in_the_executor():
    scores = RNG.uniform(-2, 2, (4, 3))
    label = np.array([2, 0, 1, 1.0])
    sym = mx.sym.SVMOutput(mx.sym.Variable("data"), mx.sym.Variable("label"), margin=1.0)
    exe = sym.simple_bind(mx.cpu(), data=(4, 3), label=(4,), grad_req={"data": "write", "label": "null"})
    exe.forward(is_train=True, data=scores, label=label)
    exe.backward()  # no head gradient: the layer makes its own
    target = np.zeros((4, 3), dtype=bool)
    target[np.arange(4), label.astype(int)] = True
    hinge = np.where(target, 1 - scores, 1 + scores).astype(np.float32)
    expected = np.where(target, -1.0, 1.0) * 2 * np.maximum(hinge, 0)
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_custom_op_backward_matches_finite_differences():
    product = custom_op_defs.pair(mx)[0]
    a, b = RNG.uniform(-1, 1, (3, 4)), RNG.uniform(-1, 1, (3, 4))
    mx.test_utils.check_numeric_gradient(product, {"a": a, "b": b}, aux_states={"pair_state": np.zeros(4)},
                                         dtype=np.float64, rtol=1e-4, atol=1e-6, use_forward_train=False)
