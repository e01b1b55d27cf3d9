"""Vision networks of the model zoo (``mx.gluon.model_zoo.vision``), with MXNet 1.9.1's names.

``get_model(name, pretrained=False, classes=..., root=..., ctx=...)``; ``pretrained=True``
loads ``<root>/<name>.params`` (nothing is downloaded) and fails clearly when it is absent.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.model_zoo.vision.alexnet import AlexNet, alexnet
from mxkit.gluon.model_zoo.vision.densenet import (
    DenseNet,
    densenet121,
    densenet161,
    densenet169,
    densenet201,
    get_densenet,
)
from mxkit.gluon.model_zoo.vision.inception import Inception3, inception_v3
from mxkit.gluon.model_zoo.vision.mobilenet import (
    MobileNet,
    MobileNetV2,
    get_mobilenet,
    get_mobilenet_v2,
    mobilenet0_5,
    mobilenet0_25,
    mobilenet0_75,
    mobilenet1_0,
    mobilenet_v2_0_5,
    mobilenet_v2_0_25,
    mobilenet_v2_0_75,
    mobilenet_v2_1_0,
)
from mxkit.gluon.model_zoo.vision.resnet import (
    BasicBlockV1,
    BasicBlockV2,
    BottleneckV1,
    BottleneckV2,
    ResNetV1,
    ResNetV2,
    get_resnet,
    resnet18_v1,
    resnet18_v2,
    resnet34_v1,
    resnet34_v2,
    resnet50_v1,
    resnet50_v2,
    resnet101_v1,
    resnet101_v2,
    resnet152_v1,
    resnet152_v2,
)
from mxkit.gluon.model_zoo.vision.small import LeNet, lenet, mlp
from mxkit.gluon.model_zoo.vision.squeezenet import SqueezeNet, get_squeezenet, squeezenet1_0, squeezenet1_1
from mxkit.gluon.model_zoo.vision.vgg import (
    VGG,
    get_vgg,
    vgg11,
    vgg11_bn,
    vgg13,
    vgg13_bn,
    vgg16,
    vgg16_bn,
    vgg19,
    vgg19_bn,
)
from mxkit.gluon.parameter import GluonError

_MODELS = {
    "resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1, "resnet50_v1": resnet50_v1,
    "resnet101_v1": resnet101_v1, "resnet152_v1": resnet152_v1,
    "resnet18_v2": resnet18_v2, "resnet34_v2": resnet34_v2, "resnet50_v2": resnet50_v2,
    "resnet101_v2": resnet101_v2, "resnet152_v2": resnet152_v2,
    "vgg11": vgg11, "vgg13": vgg13, "vgg16": vgg16, "vgg19": vgg19,
    "vgg11_bn": vgg11_bn, "vgg13_bn": vgg13_bn, "vgg16_bn": vgg16_bn, "vgg19_bn": vgg19_bn,
    "alexnet": alexnet, "inceptionv3": inception_v3,
    "densenet121": densenet121, "densenet161": densenet161, "densenet169": densenet169, "densenet201": densenet201,
    "squeezenet1.0": squeezenet1_0, "squeezenet1.1": squeezenet1_1,
    "mobilenet1.0": mobilenet1_0, "mobilenet0.75": mobilenet0_75, "mobilenet0.5": mobilenet0_5,
    "mobilenet0.25": mobilenet0_25,
    "mobilenetv2_1.0": mobilenet_v2_1_0, "mobilenetv2_0.75": mobilenet_v2_0_75, "mobilenetv2_0.5": mobilenet_v2_0_5,
    "mobilenetv2_0.25": mobilenet_v2_0_25,
    "lenet": lenet, "mlp": mlp,
}


def get_model(name: str, **kwargs: Any) -> Any:
    """The network ``name`` (MXNet's names: ``resnet18_v1``, ``vgg16_bn``, ``squeezenet1.1``,
    ``mobilenetv2_0.5``...), built with ``kwargs`` (``classes``, ``pretrained``, ``root``, ``ctx``)."""
    key = name.lower()
    if key not in _MODELS:
        raise GluonError(f"model {name!r} is not in the model zoo; the models are: {', '.join(sorted(_MODELS))}")
    return _MODELS[key](**kwargs)


__all__ = [
    "VGG", "AlexNet", "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2", "DenseNet", "Inception3", "LeNet",
    "MobileNet", "MobileNetV2", "ResNetV1", "ResNetV2", "SqueezeNet", "alexnet", "densenet121", "densenet161",
    "densenet169", "densenet201", "get_densenet", "get_mobilenet", "get_mobilenet_v2", "get_model", "get_resnet",
    "get_squeezenet", "get_vgg", "inception_v3", "lenet", "mlp", "mobilenet0_5", "mobilenet0_25", "mobilenet0_75",
    "mobilenet1_0",
    "mobilenet_v2_0_5", "mobilenet_v2_0_25", "mobilenet_v2_0_75", "mobilenet_v2_1_0", "resnet18_v1", "resnet18_v2",
    "resnet34_v1", "resnet34_v2", "resnet50_v1", "resnet50_v2", "resnet101_v1", "resnet101_v2", "resnet152_v1",
    "resnet152_v2", "squeezenet1_0", "squeezenet1_1", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn",
    "vgg19", "vgg19_bn",
]
