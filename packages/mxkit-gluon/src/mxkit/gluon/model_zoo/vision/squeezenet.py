"""SqueezeNet 1.0 and 1.1 (Iandola et al., 2016): MXNet 1.9.1's model-zoo definition and
parameter names."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained
from mxkit.gluon.parameter import GluonError


def _fire_conv(channels: int, kernel_size: int, padding: int = 0) -> nn.HybridSequential:
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size, padding=padding))
    out.add(nn.Activation("relu"))
    return out


def _fire(squeeze: int, expand1x1: int, expand3x3: int) -> nn.HybridSequential:
    """A fire module: a 1x1 squeeze, then 1x1 and 3x3 expansions concatenated along channels."""
    out = nn.HybridSequential(prefix="")
    out.add(_fire_conv(squeeze, 1))
    paths = nn.HybridConcatenate(axis=1, prefix="")
    paths.add(_fire_conv(expand1x1, 1))
    paths.add(_fire_conv(expand3x3, 3, 1))
    out.add(paths)
    return out


class SqueezeNet(HybridBlock):
    """SqueezeNet ``version`` '1.0' or '1.1' (the classifier's 13x13 average pool expects 224x224 inputs)."""

    def __init__(self, version: str, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if version not in ("1.0", "1.1"):
            raise GluonError(f"SqueezeNet version {version!r} does not exist; '1.0' or '1.1'")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            if version == "1.0":
                self.features.add(nn.Conv2D(96, kernel_size=7, strides=2))
                self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(16, 64, 64))
                self.features.add(_fire(16, 64, 64))
                self.features.add(_fire(32, 128, 128))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(32, 128, 128))
                self.features.add(_fire(48, 192, 192))
                self.features.add(_fire(48, 192, 192))
                self.features.add(_fire(64, 256, 256))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(64, 256, 256))
            else:
                self.features.add(nn.Conv2D(64, kernel_size=3, strides=2))
                self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(16, 64, 64))
                self.features.add(_fire(16, 64, 64))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(32, 128, 128))
                self.features.add(_fire(32, 128, 128))
                self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                self.features.add(_fire(48, 192, 192))
                self.features.add(_fire(48, 192, 192))
                self.features.add(_fire(64, 256, 256))
                self.features.add(_fire(64, 256, 256))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1))
            self.output.add(nn.Activation("relu"))
            self.output.add(nn.AvgPool2D(13))
            self.output.add(nn.Flatten())

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


def get_squeezenet(version: str, pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT,
                   **kwargs: Any) -> SqueezeNet:
    """SqueezeNet ``version`` ('1.0' or '1.1')."""
    net = SqueezeNet(version, **kwargs)
    if pretrained:
        load_pretrained(net, f"squeezenet{version}", root, ctx)
    return net


def squeezenet1_0(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.0."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.1 (2.4x less computation than 1.0 at the same accuracy)."""
    return get_squeezenet("1.1", **kwargs)
