"""DenseNet (Huang et al., 2016): MXNet 1.9.1's model-zoo definition and parameter names."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained
from mxkit.gluon.parameter import GluonError


class Identity(HybridBlock):
    """Returns its input (the shortcut path of a dense layer)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return x


def _dense_layer(growth_rate: int, bn_size: int, dropout: float) -> nn.HybridConcatenate:
    """BN-ReLU-1x1 conv, BN-ReLU-3x3 conv producing ``growth_rate`` channels, concatenated to the input."""
    new_features = nn.HybridSequential(prefix="")
    new_features.add(nn.BatchNorm())
    new_features.add(nn.Activation("relu"))
    new_features.add(nn.Conv2D(bn_size * growth_rate, kernel_size=1, use_bias=False))
    new_features.add(nn.BatchNorm())
    new_features.add(nn.Activation("relu"))
    new_features.add(nn.Conv2D(growth_rate, kernel_size=3, padding=1, use_bias=False))
    if dropout:
        new_features.add(nn.Dropout(dropout))
    out = nn.HybridConcatenate(axis=1, prefix="")
    out.add(Identity())
    out.add(new_features)
    return out


def _dense_block(num_layers: int, bn_size: int, growth_rate: int, dropout: float,
                 stage_index: int) -> nn.HybridSequential:
    out = nn.HybridSequential(prefix=f"stage{stage_index}_")
    with out.name_scope():
        for _ in range(num_layers):
            out.add(_dense_layer(growth_rate, bn_size, dropout))
    return out


def _transition(num_output_features: int) -> nn.HybridSequential:
    out = nn.HybridSequential(prefix="")
    out.add(nn.BatchNorm())
    out.add(nn.Activation("relu"))
    out.add(nn.Conv2D(num_output_features, kernel_size=1, use_bias=False))
    out.add(nn.AvgPool2D(pool_size=2, strides=2))
    return out


class DenseNet(HybridBlock):
    """DenseNet: a stem, dense blocks of ``block_config[i]`` layers joined by halving
    transitions, BN-ReLU, a 7x7 average pool (224x224 inputs) and the classifier."""

    def __init__(self, num_init_features: int, growth_rate: int, block_config: list[int], bn_size: int = 4,
                 dropout: float = 0, classes: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(num_init_features, kernel_size=7, strides=2, padding=3, use_bias=False))
            self.features.add(nn.BatchNorm())
            self.features.add(nn.Activation("relu"))
            self.features.add(nn.MaxPool2D(pool_size=3, strides=2, padding=1))
            num_features = num_init_features
            for i, num_layers in enumerate(block_config):
                self.features.add(_dense_block(num_layers, bn_size, growth_rate, dropout, i + 1))
                num_features += num_layers * growth_rate
                if i != len(block_config) - 1:
                    self.features.add(_transition(num_features // 2))
                    num_features //= 2
            self.features.add(nn.BatchNorm())
            self.features.add(nn.Activation("relu"))
            self.features.add(nn.AvgPool2D(pool_size=7))
            self.features.add(nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


DENSENET_SPEC = {121: (64, 32, [6, 12, 24, 16]),
                 161: (96, 48, [6, 12, 36, 24]),
                 169: (64, 32, [6, 12, 32, 32]),
                 201: (64, 32, [6, 12, 48, 32])}


def get_densenet(num_layers: int, pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT,
                 **kwargs: Any) -> DenseNet:
    """DenseNet with ``num_layers`` layers (121, 161, 169 or 201)."""
    if num_layers not in DENSENET_SPEC:
        raise GluonError(f"DenseNet with {num_layers} layers is not available; choose one of "
                         f"{sorted(DENSENET_SPEC)}")
    num_init_features, growth_rate, block_config = DENSENET_SPEC[num_layers]
    net = DenseNet(num_init_features, growth_rate, block_config, **kwargs)
    if pretrained:
        load_pretrained(net, f"densenet{num_layers}", root, ctx)
    return net


def _constructor(num_layers: int) -> Any:
    def make(**kwargs: Any) -> DenseNet:
        return get_densenet(num_layers, **kwargs)

    make.__name__ = f"densenet{num_layers}"
    make.__doc__ = f"DenseNet-{num_layers}."
    return make


densenet121, densenet161, densenet169, densenet201 = (_constructor(n) for n in DENSENET_SPEC)
