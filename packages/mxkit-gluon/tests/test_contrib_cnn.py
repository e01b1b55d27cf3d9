"""gluon.contrib.cnn's deformable convolution layers: MXNet 1.9.1's parameter names and order,
a new layer (zero offsets) equal to Conv2D, hybridized equal to imperative in outputs and
gradients with learned offsets, and the refusals. (The operators themselves are tested
against a per-pixel loop and finite differences in mxkit-ndarray.)"""

import re

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, nn
from mxkit.gluon.contrib.cnn import DeformableConvolution, ModulatedDeformableConvolution

X = np.random.RandomState(0).uniform(-1, 1, (2, 4, 7, 6)).astype(np.float32)


@pytest.mark.parametrize("layer_type, alias", [(DeformableConvolution, "deformable_conv"),
                                                (ModulatedDeformableConvolution, "modulated_deformable_conv")])
def test_names_and_a_new_layer_is_a_convolution(layer_type, alias):
    layer = layer_type(3, kernel_size=(3, 2), padding=1, groups=1, num_deformable_group=2)
    names = list(layer.collect_params().keys())
    offsets = [f"{alias}0_offset_weight", f"{alias}0_offset_bias"]
    kernels = [f"{alias}0_deformable_conv_weight", f"{alias}0_deformable_conv_bias"]
    assert names == (kernels + offsets if layer_type is ModulatedDeformableConvolution else offsets + kernels)
    layer.initialize(mx.init.Uniform(0.5))
    # the offset convolution starts at zero: the regular grid (and a mask of 2 * sigmoid(0) = 1)
    out = layer(mx.nd.array(X))
    assert layer.offset_weight.shape == ((3 if layer_type is ModulatedDeformableConvolution else 2) * 12, 4, 3, 2)
    conv = nn.Conv2D(3, kernel_size=(3, 2), padding=1, in_channels=4)
    conv.initialize()
    conv.weight.set_data(layer.deformable_conv_weight.data())
    conv.bias.set_data(layer.deformable_conv_bias.data())
    np.testing.assert_allclose(out.asnumpy(), conv(mx.nd.array(X)).asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer_type", [DeformableConvolution, ModulatedDeformableConvolution])
def test_hybridized_equals_imperative_with_learned_offsets(layer_type):
    results = []
    for hybridize in (False, True):
        mx.random.seed(3)
        net = nn.HybridSequential()
        net.add(layer_type(3, kernel_size=3, padding=1, activation="relu",
                           offset_weight_initializer=mx.init.Normal(0.3)),
                layer_type(2, kernel_size=(2, 3), strides=(1, 2), use_bias=False, offset_use_bias=False))
        net.initialize(mx.init.Uniform(0.5))
        if hybridize:
            net.hybridize()
        x = mx.nd.array(X)
        x.attach_grad()
        with mx.autograd.record():
            out = net(x)
            (out * out).sum().backward()
        results.append((out.asnumpy(), x.grad.asnumpy(),
                        [(re.sub(r"^\D+\d+_", "", k), p.grad().asnumpy()) for k, p in net.collect_params().items()]))
    (out_a, grad_a, params_a), (out_b, grad_b, params_b) = results
    assert [k for k, _ in params_a] == [k for k, _ in params_b]
    assert all(np.abs(g).sum() > 0 for k, g in params_a if "offset_weight" in k)  # the offsets learn
    np.testing.assert_allclose(out_a, out_b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad_a, grad_b, rtol=1e-4, atol=1e-5)
    for (key, a), (_, b) in zip(params_a, params_b):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=key)


def test_refusals():
    with pytest.raises(GluonError, match="layout 'NHWC' is not supported"):
        DeformableConvolution(2, kernel_size=3, layout="NHWC")
    with pytest.raises(GluonError, match="pair of ints"):
        DeformableConvolution(2, kernel_size=(3, 3, 3))
