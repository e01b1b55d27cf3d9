"""ResNet v1 (He et al., 2015) and v2 (pre-activation, He et al., 2016): MXNet 1.9.1's model-zoo
definitions and parameter names."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained
from mxkit.gluon.parameter import GluonError


def _conv3x3(channels: int, stride: int, in_channels: int) -> nn.Conv2D:
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False, in_channels=in_channels)


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions with a shortcut (ResNet-18/34)."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(_conv3x3(channels, 1, channels))
        self.body.add(nn.BatchNorm())
        if downsample:
            self.downsample = nn.HybridSequential(prefix="")
            self.downsample.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                                          in_channels=in_channels))
            self.downsample.add(nn.BatchNorm())
        else:
            self.downsample = None

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        residual = self.downsample(x) if self.downsample is not None else x
        return F.Activation(residual + self.body(x), act_type="relu")


class BottleneckV1(HybridBlock):
    """1x1, 3x3, 1x1 convolutions with a shortcut (ResNet-50 and deeper)."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(channels // 4, kernel_size=1, strides=stride))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(_conv3x3(channels // 4, 1, channels // 4))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(nn.Conv2D(channels, kernel_size=1, strides=1))
        self.body.add(nn.BatchNorm())
        if downsample:
            self.downsample = nn.HybridSequential(prefix="")
            self.downsample.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                                          in_channels=in_channels))
            self.downsample.add(nn.BatchNorm())
        else:
            self.downsample = None

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        residual = self.downsample(x) if self.downsample is not None else x
        return F.Activation(self.body(x) + residual, act_type="relu")


def _make_stage(block: type, layers: int, channels: int, stride: int, stage_index: int,
                in_channels: int = 0) -> nn.HybridSequential:
    """Stage ``stage_index`` (parameters ``stage{i}_...``): ``layers`` blocks, the first strided."""
    layer = nn.HybridSequential(prefix=f"stage{stage_index}_")
    with layer.name_scope():
        layer.add(block(channels, stride, channels != in_channels, in_channels=in_channels, prefix=""))
        for _ in range(layers - 1):
            layer.add(block(channels, 1, False, in_channels=channels, prefix=""))
    return layer


class ResNetV1(HybridBlock):
    """ResNet v1: a stem, four stages of ``block`` and a classifier.

    Parameters
    ----------
    block : type
        ``BasicBlockV1`` or ``BottleneckV1``.
    layers : list of int
        Blocks per stage.
    channels : list of int
        The stem's channels, then each stage's.
    classes : int
    thumbnail : bool
        A 3x3 stem without pooling, for 32x32 images.
    """

    def __init__(self, block: type, layers: list[int], channels: list[int], classes: int = 1000,
                 thumbnail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise GluonError(f"ResNetV1: {len(layers)} stages need {len(layers) + 1} channel counts, got {channels}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            if thumbnail:
                self.features.add(_conv3x3(channels[0], 1, 0))
            else:
                self.features.add(nn.Conv2D(channels[0], 7, 2, 3, use_bias=False))
                self.features.add(nn.BatchNorm())
                self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(3, 2, 1))
            for i, num_layer in enumerate(layers):
                stride = 1 if i == 0 else 2
                self.features.add(self._make_layer(block, num_layer, channels[i + 1], stride, i + 1,
                                                   in_channels=channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])

    def _make_layer(self, block: type, layers: int, channels: int, stride: int, stage_index: int,
                    in_channels: int = 0) -> nn.HybridSequential:
        return _make_stage(block, layers, channels, stride, stage_index, in_channels)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


class BasicBlockV2(HybridBlock):
    """Pre-activation basic block: BN, ReLU, 3x3 conv, BN, ReLU, 3x3 conv, plus the shortcut."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        if downsample:
            self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)
        else:
            self.downsample = None

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        residual = x
        x = F.Activation(self.bn1(x), act_type="relu")
        if self.downsample is not None:
            residual = self.downsample(x)  # v2 projects the activated input
        x = F.Activation(self.bn2(self.conv1(x)), act_type="relu")
        return self.conv2(x) + residual


class BottleneckV2(HybridBlock):
    """Pre-activation bottleneck: (BN, ReLU, conv) for 1x1, 3x3, 1x1, plus the shortcut."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(channels // 4, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels // 4, stride, channels // 4)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        if downsample:
            self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)
        else:
            self.downsample = None

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        residual = x
        x = F.Activation(self.bn1(x), act_type="relu")
        if self.downsample is not None:
            residual = self.downsample(x)
        x = F.Activation(self.bn2(self.conv1(x)), act_type="relu")
        x = F.Activation(self.bn3(self.conv2(x)), act_type="relu")
        return self.conv3(x) + residual


class ResNetV2(HybridBlock):
    """ResNet v2: input BatchNorm, a stem, four stages of pre-activation blocks, BN-ReLU and a
    classifier (parameters as :class:`ResNetV1`)."""

    def __init__(self, block: type, layers: list[int], channels: list[int], classes: int = 1000,
                 thumbnail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise GluonError(f"ResNetV2: {len(layers)} stages need {len(layers) + 1} channel counts, got {channels}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            if thumbnail:
                self.features.add(_conv3x3(channels[0], 1, 0))
            else:
                self.features.add(nn.Conv2D(channels[0], 7, 2, 3, use_bias=False))
                self.features.add(nn.BatchNorm())
                self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(3, 2, 1))
            in_channels = channels[0]
            for i, num_layer in enumerate(layers):
                stride = 1 if i == 0 else 2
                self.features.add(_make_stage(block, num_layer, channels[i + 1], stride, i + 1, in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm())
            self.features.add(nn.Activation("relu"))
            self.features.add(nn.GlobalAvgPool2D())
            self.features.add(nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


RESNET_SPEC = {18: ("basic", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
               34: ("basic", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
               50: ("bottleneck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
               101: ("bottleneck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
               152: ("bottleneck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}
_VERSIONS = {1: (ResNetV1, {"basic": BasicBlockV1, "bottleneck": BottleneckV1}),
             2: (ResNetV2, {"basic": BasicBlockV2, "bottleneck": BottleneckV2})}


def get_resnet(version: int, num_layers: int, pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT,
               **kwargs: Any) -> HybridBlock:
    """ResNet ``v{version}`` (1 or 2) with ``num_layers`` layers (18, 34, 50, 101 or 152)."""
    if version not in _VERSIONS:
        raise GluonError(f"ResNet version {version} does not exist; version 1 or 2")
    if num_layers not in RESNET_SPEC:
        raise GluonError(f"ResNet with {num_layers} layers is not available; choose one of {sorted(RESNET_SPEC)}")
    kind, layers, channels = RESNET_SPEC[num_layers]
    net_class, blocks = _VERSIONS[version]
    net = net_class(blocks[kind], layers, channels, **kwargs)
    if pretrained:
        load_pretrained(net, f"resnet{num_layers}_v{version}", root, ctx)
    return net


def _constructor(version: int, num_layers: int) -> Any:
    def make(**kwargs: Any) -> HybridBlock:
        return get_resnet(version, num_layers, **kwargs)

    make.__name__ = f"resnet{num_layers}_v{version}"
    make.__doc__ = f"ResNet-{num_layers} v{version} (keyword arguments: classes, thumbnail, pretrained, root, ctx)."
    return make


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (_constructor(1, n) for n in RESNET_SPEC)
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (_constructor(2, n) for n in RESNET_SPEC)
