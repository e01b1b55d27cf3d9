"""Every layer and loss, imperative and hybridized, against MXNet 1.9.1's outputs and gradients.

Tolerances: the fixtures are float32 results of MXNet's kernels; ours compute the same
formulas in float32 with other summation orders. A sum of n float32 products differs by at
most about n * eps * sum|terms|; for these small layers (n <= 50, terms of order 1) that is
below 1e-5 relative to the output scale, so rtol=1e-4, atol=1e-5 leaves a 10x margin
without hiding a wrong formula (which is off by O(1)).
"""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import loss as gloss
from mxkit.gluon import nn

RTOL, ATOL = 1e-4, 1e-5

LAYERS = {
    "dense": (lambda: nn.Dense(5), False),
    "dense_tanh_noflatten": (lambda: nn.Dense(5, activation="tanh", flatten=False), False),
    "conv1d": (lambda: nn.Conv1D(3, 3, padding=1), False),
    "conv2d": (lambda: nn.Conv2D(3, (3, 2), strides=2, padding=1), False),
    "conv2d_groups": (lambda: nn.Conv2D(4, 3, groups=2, use_bias=False), False),
    "conv3d": (lambda: nn.Conv3D(2, 2), False),
    "conv2d_transpose": (lambda: nn.Conv2DTranspose(3, 3, strides=2, padding=1, output_padding=1), False),
    "conv1d_transpose": (lambda: nn.Conv1DTranspose(3, 3, strides=2, output_padding=1), False),
    "conv3d_transpose": (lambda: nn.Conv3DTranspose(2, 2, strides=2), False),
    "reflectionpad2d": (lambda: nn.ReflectionPad2D(2), False),
    "groupnorm": (lambda: nn.GroupNorm(num_groups=2), False),
    "maxpool2d": (lambda: nn.MaxPool2D(), False),
    "maxpool2d_ceil": (lambda: nn.MaxPool2D(3, 2, ceil_mode=True), False),
    "avgpool2d": (lambda: nn.AvgPool2D(3, strides=2, padding=1), False),
    "globalavgpool2d": (lambda: nn.GlobalAvgPool2D(), False),
    "globalmaxpool2d": (lambda: nn.GlobalMaxPool2D(), False),
    "batchnorm": (lambda: nn.BatchNorm(), False),
    "layernorm": (lambda: nn.LayerNorm(), False),
    "instancenorm": (lambda: nn.InstanceNorm(), False),
    "embedding": (lambda: nn.Embedding(10, 4), True),
    "flatten": (lambda: nn.Flatten(), False),
    "sigmoid": (lambda: nn.Activation("sigmoid"), False),
    "leakyrelu": (lambda: nn.LeakyReLU(0.1), False),
    "prelu": (lambda: nn.PReLU(), False),
    "elu": (lambda: nn.ELU(), False),
    "selu": (lambda: nn.SELU(), False),
    "swish": (lambda: nn.Swish(), False),
    "gelu": (lambda: nn.GELU(), False),
}

LOSSES = {
    "l1": lambda: gloss.L1Loss(),
    "l2": lambda: gloss.L2Loss(),
    "softmax_ce": lambda: gloss.SoftmaxCrossEntropyLoss(),
    "softmax_ce_dense": lambda: gloss.SoftmaxCrossEntropyLoss(sparse_label=False),
    "sigmoid_bce": lambda: gloss.SigmoidBinaryCrossEntropyLoss(),
    "sigmoid_bce_from_sigmoid": lambda: gloss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True),
    "kldiv": lambda: gloss.KLDivLoss(),
    "huber": lambda: gloss.HuberLoss(rho=0.5),
    "hinge": lambda: gloss.HingeLoss(),
    "logistic": lambda: gloss.LogisticLoss(),
    "logistic_binary": lambda: gloss.LogisticLoss(label_format="binary"),
    "triplet": lambda: gloss.TripletLoss(margin=0.5),
    "poisson_nll": lambda: gloss.PoissonNLLLoss(),
    "poisson_nll_rates": lambda: gloss.PoissonNLLLoss(from_logits=False),
}


@pytest.fixture(scope="module")
def layers():
    from pathlib import Path

    return dict(np.load(Path(__file__).parent / "fixtures" / "layers.npz"))


@pytest.fixture(scope="module")
def losses():
    from pathlib import Path

    return dict(np.load(Path(__file__).parent / "fixtures" / "losses.npz"))


def _run_layer(name, make, integer, ref, hybridize):
    layer = make()
    layer.initialize()
    x = mx.nd.array(ref[f"{name}/x"])
    layer(x)  # deferred initialisation
    params = layer._collect_params_with_prefix()
    for key, param in params.items():
        if f"{name}/param/{key}" in ref:
            param.set_data(mx.nd.array(ref[f"{name}/param/{key}"]))
    if hybridize:
        layer.hybridize()
    if not integer:
        x.attach_grad()
    with mx.autograd.record():
        out = layer(x)
        total = (out * mx.nd.array(ref[f"{name}/head"])).sum()
    total.backward()
    return layer, params, x, out


def _selu_input_gradient(x, head):
    """SELU's exact input gradient: MXNet 1.9.1's deviates for negative inputs (by up to 5%
    here; finite differences agree with this formula, not with MXNet)."""
    lam, alpha = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
    return np.where(x > 0, lam, lam * alpha * np.exp(x)) * head


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_mxnet(layers, name, hybridize):
    make, integer = LAYERS[name]
    _layer, params, x, out = _run_layer(name, make, integer, layers, hybridize)
    np.testing.assert_allclose(out.asnumpy(), layers[f"{name}/out"], rtol=RTOL, atol=ATOL)
    if name == "selu":
        expected = _selu_input_gradient(layers["selu/x"].astype(np.float64), layers["selu/head"])
        np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=RTOL, atol=ATOL)
    elif not integer:
        np.testing.assert_allclose(x.grad.asnumpy(), layers[f"{name}/grad/x"], rtol=RTOL, atol=ATOL)
    for key, param in params.items():
        if f"{name}/grad/{key}" in layers:
            np.testing.assert_allclose(param.grad().asnumpy(), layers[f"{name}/grad/{key}"], rtol=RTOL, atol=ATOL,
                                       err_msg=f"gradient of {key}")
        if f"{name}/after/{key}" in layers:
            np.testing.assert_allclose(param.data().asnumpy(), layers[f"{name}/after/{key}"], rtol=RTOL, atol=ATOL,
                                       err_msg=f"running statistic {key}")


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_matches_mxnet(losses, name, hybridize):
    loss = LOSSES[name]()
    if hybridize:
        loss.hybridize()
    pred = mx.nd.array(losses[f"{name}/pred"])
    pred.attach_grad()
    extra = [mx.nd.array(losses[f"{name}/negative"])] if f"{name}/negative" in losses else []
    with mx.autograd.record():
        value = loss(pred, mx.nd.array(losses[f"{name}/label"]), *extra)
    value.backward()
    np.testing.assert_allclose(value.asnumpy(), losses[f"{name}/loss"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(pred.grad.asnumpy(), losses[f"{name}/grad"], rtol=RTOL, atol=ATOL)
