"""Small networks for quick experiments: an MLP and LeNet (not in MXNet's zoo; mxkit's own)."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained


def mlp(hidden: tuple[int, ...] = (128, 64), classes: int = 10, pretrained: bool = False, ctx: Any = None,
        root: str = DEFAULT_ROOT, **kwargs: Any) -> nn.HybridSequential:
    """A multilayer perceptron: ReLU ``Dense`` layers of ``hidden`` units, then ``classes`` outputs."""
    net = nn.HybridSequential(**kwargs)
    with net.name_scope():
        for units in hidden:
            net.add(nn.Dense(units, activation="relu"))
        net.add(nn.Dense(classes))
    if pretrained:
        load_pretrained(net, "mlp", root, ctx)
    return net


class LeNet(nn.HybridSequential):
    """LeNet-5 style: two convolution/pooling stages and two dense layers."""

    def __init__(self, classes: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.add(nn.Conv2D(20, 5, activation="tanh"), nn.MaxPool2D(2, 2),
                     nn.Conv2D(50, 5, activation="tanh"), nn.MaxPool2D(2, 2),
                     nn.Flatten(), nn.Dense(500, activation="tanh"), nn.Dense(classes))


def lenet(classes: int = 10, pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT,
          **kwargs: Any) -> LeNet:
    """LeNet for ``classes`` classes."""
    net = LeNet(classes, **kwargs)
    if pretrained:
        load_pretrained(net, "lenet", root, ctx)
    return net
