"""Vision networks of the model zoo (``mx.gluon.model_zoo.vision``)."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.model_zoo.vision.resnet import (
    BasicBlockV1,
    BottleneckV1,
    ResNetV1,
    get_resnet,
    resnet18_v1,
    resnet34_v1,
    resnet50_v1,
)
from mxkit.gluon.model_zoo.vision.small import LeNet, lenet, mlp
from mxkit.gluon.parameter import GluonError

_MODELS = {"resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1, "resnet50_v1": resnet50_v1, "lenet": lenet,
           "mlp": mlp}


def get_model(name: str, **kwargs: Any) -> Any:
    """The network ``name`` (``resnet18_v1``...), built with ``kwargs`` (``classes``,
    ``pretrained``, ``root``, ``ctx``)."""
    key = name.lower()
    if key not in _MODELS:
        raise GluonError(f"model {name!r} is not in the model zoo; the models are: {', '.join(sorted(_MODELS))}")
    return _MODELS[key](**kwargs)


__all__ = ["BasicBlockV1", "BottleneckV1", "LeNet", "ResNetV1", "get_model", "get_resnet", "lenet", "mlp",
           "resnet18_v1", "resnet34_v1", "resnet50_v1"]
