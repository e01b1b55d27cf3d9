"""Optimizers (``mx.optimizer``): MXNet 1.x's classes, registry, updater and fused update operators.

>>> opt = mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=1e-4)
>>> updater = mx.optimizer.get_updater(opt)
>>> updater(0, grad, weight)                      # weight updated in place on its device
>>> same = mx.optimizer.create(**json.loads(opt.dumps()))
"""

from __future__ import annotations

from mxkit.train._registry import TrainingValueError, UnknownNameError
from mxkit.train.optimizer.adaptive import AdaDelta, AdaGrad, Adam, Ftrl, RMSProp
from mxkit.train.optimizer.base import Optimizer, create, loads, register
from mxkit.train.optimizer.extra import DCASGD, FTML, SGLD, Adamax, Nadam, Test
from mxkit.train.optimizer.layerwise import LAMB, LARS
from mxkit.train.optimizer.sgd import NAG, SGD, Signum, ccSGD
from mxkit.train.optimizer.updater import Updater, get_updater

__all__ = [
    "DCASGD", "FTML", "LAMB", "LARS", "NAG", "SGD", "SGLD", "AdaDelta", "AdaGrad", "Adam", "Adamax", "Ftrl", "Nadam",
    "Optimizer", "RMSProp", "Signum", "Test", "TrainingValueError", "UnknownNameError", "Updater", "ccSGD", "create",
    "get_updater", "loads", "register",
]
