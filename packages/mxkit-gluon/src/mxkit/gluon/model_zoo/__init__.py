"""Gluon's model zoo (``mx.gluon.model_zoo``): network definitions with MXNet's names."""

from mxkit.gluon.model_zoo import vision
from mxkit.gluon.model_zoo.vision import get_model

__all__ = ["get_model", "vision"]
