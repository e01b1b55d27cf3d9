"""VGG (Simonyan and Zisserman, 2014), with and without BatchNorm: MXNet 1.9.1's model-zoo
definition and parameter names."""

from __future__ import annotations

from typing import Any

from mxkit.gluon import nn
from mxkit.gluon.block import HybridBlock
from mxkit.gluon.model_zoo.vision.pretrained import DEFAULT_ROOT, load_pretrained
from mxkit.gluon.parameter import GluonError


class VGG(HybridBlock):
    """Stacks of 3x3 convolutions (``layers[i]`` of ``filters[i]`` channels, each stack ending
    in a 2x2 max-pool), then two 4096-unit dense layers with dropout and the classifier."""

    def __init__(self, layers: list[int], filters: list[int], classes: int = 1000, batch_norm: bool = False,
                 **kwargs: Any) -> None:
        from mxkit.train.initializer import Xavier

        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise GluonError(f"VGG: {len(layers)} stacks need as many filter counts, got {filters}")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for count, channels in zip(layers, filters):
                for _ in range(count):
                    self.features.add(nn.Conv2D(channels, kernel_size=3, padding=1,
                                                weight_initializer=Xavier(rnd_type="gaussian", factor_type="out",
                                                                          magnitude=2),
                                                bias_initializer="zeros"))
                    if batch_norm:
                        self.features.add(nn.BatchNorm())
                    self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(strides=2))
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal",
                                           bias_initializer="zeros"))
                self.features.add(nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal", bias_initializer="zeros")

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.features(x))


VGG_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
            13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
            16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
            19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_vgg(num_layers: int, pretrained: bool = False, ctx: Any = None, root: str = DEFAULT_ROOT,
            **kwargs: Any) -> VGG:
    """VGG with ``num_layers`` layers (11, 13, 16 or 19); ``batch_norm=True`` for the ``_bn`` variant."""
    if num_layers not in VGG_SPEC:
        raise GluonError(f"VGG with {num_layers} layers is not available; choose one of {sorted(VGG_SPEC)}")
    layers, filters = VGG_SPEC[num_layers]
    net = VGG(layers, filters, **kwargs)
    if pretrained:
        load_pretrained(net, f"vgg{num_layers}{'_bn' if kwargs.get('batch_norm') else ''}", root, ctx)
    return net


def _constructor(num_layers: int, batch_norm: bool) -> Any:
    def make(**kwargs: Any) -> VGG:
        if batch_norm:
            kwargs["batch_norm"] = True
        return get_vgg(num_layers, **kwargs)

    make.__name__ = f"vgg{num_layers}{'_bn' if batch_norm else ''}"
    make.__doc__ = f"VGG-{num_layers}{' with BatchNorm' if batch_norm else ''}."
    return make


vgg11, vgg13, vgg16, vgg19 = (_constructor(n, False) for n in VGG_SPEC)
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (_constructor(n, True) for n in VGG_SPEC)
