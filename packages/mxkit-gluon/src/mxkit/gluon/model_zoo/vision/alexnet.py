"""AlexNet (Krizhevsky et al., 2012): MXNet 1.9.1's model-zoo definition and parameter names."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained


class AlexNet(HybridBlock):
    """Five convolutions with three max-pools, two 4096-unit dense layers with dropout, the classifier."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            with self.features.name_scope():
                self.features.add(nn.Conv2D(64, kernel_size=11, strides=4, padding=2, activation="relu"))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
                self.features.add(nn.Conv2D(192, kernel_size=5, padding=2, activation="relu"))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
                self.features.add(nn.Conv2D(384, kernel_size=3, padding=1, activation="relu"))
                self.features.add(nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"))
                self.features.add(nn.Conv2D(256, kernel_size=3, padding=1, activation="relu"))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
                self.features.add(nn.Flatten())
                for _ in range(2):
                    self.features.add(nn.Dense(4096, activation="relu"))
                    self.features.add(nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


def alexnet(pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT, **kwargs: Any) -> AlexNet:
    """AlexNet (keyword arguments: classes, pretrained, root, ctx)."""
    net = AlexNet(**kwargs)
    if pretrained:
        load_pretrained(net, "alexnet", root, ctx)
    return net
