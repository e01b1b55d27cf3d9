"""Inception v3 (Szegedy et al., 2015): MXNet 1.9.1's model-zoo definition and parameter names
(the classifier's 8x8 average pool expects 299x299 inputs)."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained

_SETTING_NAMES = ("channels", "kernel_size", "strides", "padding")


def _basic_conv(**kwargs: Any) -> nn.HybridSequential:
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(use_bias=False, **kwargs))
    out.add(nn.BatchNorm(epsilon=0.001))
    out.add(nn.Activation("relu"))
    return out


def _branch(use_pool: str | None, *conv_settings: tuple) -> nn.HybridSequential:
    """An optional pool, then a conv-BN-ReLU for each ``(channels, kernel, strides, padding)``
    (None: the default)."""
    out = nn.HybridSequential(prefix="")
    if use_pool == "avg":
        out.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif use_pool == "max":
        out.add(nn.MaxPool2D(pool_size=3, strides=2))
    for setting in conv_settings:
        out.add(_basic_conv(**{name: value for name, value in zip(_SETTING_NAMES, setting) if value is not None}))
    return out


def _concurrent(prefix: str) -> nn.HybridConcatenate:
    return nn.HybridConcatenate(axis=1, prefix=prefix)


def _block_a(pool_features: int, prefix: str) -> nn.HybridConcatenate:
    out = _concurrent(prefix)
    with out.name_scope():
        out.add(_branch(None, (64, 1, None, None)))
        out.add(_branch(None, (48, 1, None, None), (64, 5, None, 2)))
        out.add(_branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, None, 1)))
        out.add(_branch("avg", (pool_features, 1, None, None)))
    return out


def _block_b(prefix: str) -> nn.HybridConcatenate:
    out = _concurrent(prefix)
    with out.name_scope():
        out.add(_branch(None, (384, 3, 2, None)))
        out.add(_branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, 2, None)))
        out.add(_branch("max"))
    return out


def _block_c(channels_7x7: int, prefix: str) -> nn.HybridConcatenate:
    c = channels_7x7
    out = _concurrent(prefix)
    with out.name_scope():
        out.add(_branch(None, (192, 1, None, None)))
        out.add(_branch(None, (c, 1, None, None), (c, (1, 7), None, (0, 3)), (192, (7, 1), None, (3, 0))))
        out.add(_branch(None, (c, 1, None, None), (c, (7, 1), None, (3, 0)), (c, (1, 7), None, (0, 3)),
                        (c, (7, 1), None, (3, 0)), (192, (1, 7), None, (0, 3))))
        out.add(_branch("avg", (192, 1, None, None)))
    return out


def _block_d(prefix: str) -> nn.HybridConcatenate:
    out = _concurrent(prefix)
    with out.name_scope():
        out.add(_branch(None, (192, 1, None, None), (320, 3, 2, None)))
        out.add(_branch(None, (192, 1, None, None), (192, (1, 7), None, (0, 3)), (192, (7, 1), None, (3, 0)),
                        (192, 3, 2, None)))
        out.add(_branch("max"))
    return out


def _block_e(prefix: str) -> nn.HybridConcatenate:
    out = _concurrent(prefix)
    with out.name_scope():
        out.add(_branch(None, (320, 1, None, None)))
        branch_3x3 = nn.HybridSequential(prefix="")
        out.add(branch_3x3)
        branch_3x3.add(_branch(None, (384, 1, None, None)))
        split = _concurrent("")
        split.add(_branch(None, (384, (1, 3), None, (0, 1))))
        split.add(_branch(None, (384, (3, 1), None, (1, 0))))
        branch_3x3.add(split)
        branch_3x3dbl = nn.HybridSequential(prefix="")
        out.add(branch_3x3dbl)
        branch_3x3dbl.add(_branch(None, (448, 1, None, None), (384, 3, None, 1)))
        split_dbl = _concurrent("")
        branch_3x3dbl.add(split_dbl)
        split_dbl.add(_branch(None, (384, (1, 3), None, (0, 1))))
        split_dbl.add(_branch(None, (384, (3, 1), None, (1, 0))))
        out.add(_branch("avg", (192, 1, None, None)))
    return out


class Inception3(HybridBlock):
    """Inception v3: a convolutional stem, blocks A1-A3, B, C1-C4, D, E1-E2, pooling, dropout,
    the classifier."""

    def __init__(self, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_basic_conv(channels=32, kernel_size=3, strides=2))
            self.features.add(_basic_conv(channels=32, kernel_size=3))
            self.features.add(_basic_conv(channels=64, kernel_size=3, padding=1))
            self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_basic_conv(channels=80, kernel_size=1))
            self.features.add(_basic_conv(channels=192, kernel_size=3))
            self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_block_a(32, "A1_"))
            self.features.add(_block_a(64, "A2_"))
            self.features.add(_block_a(64, "A3_"))
            self.features.add(_block_b("B_"))
            self.features.add(_block_c(128, "C1_"))
            self.features.add(_block_c(160, "C2_"))
            self.features.add(_block_c(160, "C3_"))
            self.features.add(_block_c(192, "C4_"))
            self.features.add(_block_d("D_"))
            self.features.add(_block_e("E1_"))
            self.features.add(_block_e("E2_"))
            self.features.add(nn.AvgPool2D(pool_size=8))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


def inception_v3(pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT, **kwargs: Any) -> Inception3:
    """Inception v3 (keyword arguments: classes, pretrained, root, ctx)."""
    net = Inception3(**kwargs)
    if pretrained:
        load_pretrained(net, "inceptionv3", root, ctx)
    return net
