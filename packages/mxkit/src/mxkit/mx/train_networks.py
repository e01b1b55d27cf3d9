"""The networks ``mxkit train --network`` builds: an MLP, a LeNet-style CNN and a small ResNet.

Each takes the shape of one sample ``(channels, height, width)`` and the number of classes
and returns a Symbol ending in ``SoftmaxOutput`` named ``softmax`` (label ``softmax_label``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.errors import ConfigError, ShapeError


def mlp(sample_shape: tuple[int, ...], num_classes: int) -> Any:
    """Two hidden layers, 128 and 64 units with ReLU (MXNet's ``mlp`` example)."""
    import mxkit.mx as mx

    net = mx.sym.Flatten(mx.sym.Variable("data"))
    net = mx.sym.FullyConnected(net, num_hidden=128, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=64, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _image_shape(sample_shape: tuple[int, ...], network: str, smallest: int) -> None:
    if len(sample_shape) != 3 or min(sample_shape[1:]) < smallest:
        raise ShapeError(f"--network {network} needs images of shape (channels, height, width) at least "
                         f"{smallest}x{smallest}, but the data has samples of shape {tuple(sample_shape)}; "
                         f"use --network mlp for flat features")


def lenet(sample_shape: tuple[int, ...], num_classes: int) -> Any:
    """LeNet's layout: two conv-tanh-maxpool stages, a tanh hidden layer, the classifier.

    Images of 16 pixels or more get LeNet's 5x5 kernels; smaller ones (scikit-learn's 8x8
    digits) get 3x3 kernels padded to keep the size, so both pooling stages fit.
    """
    import mxkit.mx as mx

    _image_shape(sample_shape, "lenet", 4)
    big = min(sample_shape[1:]) >= 16
    kernel, pad = ((5, 5), (0, 0)) if big else ((3, 3), (1, 1))
    net = mx.sym.Variable("data")
    net = mx.sym.Convolution(net, kernel=kernel, pad=pad, num_filter=20, name="conv1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh1")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = mx.sym.Convolution(net, kernel=kernel, pad=pad, num_filter=50, name="conv2")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh2")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=500 if big else 128, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh3")
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _residual_unit(data: Any, num_filter: int, stride: int, match_shape: bool, name: str) -> Any:
    """Pre-activation residual unit (BN-ReLU-conv twice, identity or 1x1 projection shortcut)."""
    import mxkit.mx as mx

    bn1 = mx.sym.BatchNorm(data, fix_gamma=False, eps=2e-5, momentum=0.9, name=f"{name}_bn1")
    act1 = mx.sym.Activation(bn1, act_type="relu", name=f"{name}_relu1")
    conv1 = mx.sym.Convolution(act1, num_filter=num_filter, kernel=(3, 3), stride=(stride, stride), pad=(1, 1),
                               no_bias=True, name=f"{name}_conv1")
    bn2 = mx.sym.BatchNorm(conv1, fix_gamma=False, eps=2e-5, momentum=0.9, name=f"{name}_bn2")
    act2 = mx.sym.Activation(bn2, act_type="relu", name=f"{name}_relu2")
    conv2 = mx.sym.Convolution(act2, num_filter=num_filter, kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                               no_bias=True, name=f"{name}_conv2")
    if match_shape:
        shortcut = data
    else:
        shortcut = mx.sym.Convolution(act1, num_filter=num_filter, kernel=(1, 1), stride=(stride, stride),
                                      no_bias=True, name=f"{name}_sc")
    return conv2 + shortcut


def resnet(sample_shape: tuple[int, ...], num_classes: int) -> Any:
    """A small pre-activation ResNet: three stages of one residual unit (16, 32, 64 filters)."""
    import mxkit.mx as mx

    _image_shape(sample_shape, "resnet", 4)
    net = mx.sym.Variable("data")
    net = mx.sym.Convolution(net, num_filter=16, kernel=(3, 3), pad=(1, 1), no_bias=True, name="conv0")
    for stage, filters in enumerate((16, 32, 64)):
        net = _residual_unit(net, filters, 1 if stage == 0 else 2, stage == 0, f"stage{stage + 1}_unit1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, eps=2e-5, momentum=0.9, name="bn_final")
    net = mx.sym.Activation(net, act_type="relu", name="relu_final")
    net = mx.sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool_final")
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


NETWORKS: dict[str, Callable[[tuple[int, ...], int], Any]] = {"mlp": mlp, "lenet": lenet, "resnet": resnet}


def build_network(name: str, sample_shape: tuple[int, ...], num_classes: int) -> Any:
    """The network called ``name`` for samples of ``sample_shape``.

    Raises
    ------
    ConfigError
        For an unknown name (listing the choices).
    """
    builder = NETWORKS.get(name.strip().lower())
    if builder is None:
        raise ConfigError(f"unknown network {name!r}; the networks are: {', '.join(NETWORKS)}")
    return builder(tuple(sample_shape), num_classes)


__all__ = ["NETWORKS", "build_network", "lenet", "mlp", "resnet"]
