"""``mx.mod`` / ``mx.module``: MXNet 1.x's module API.

``Module`` binds a symbol over one or several devices (``DataParallelExecutorGroup``),
initialises its parameters, runs an optimizer locally or through a KVStore, and trains
with ``fit``; ``BaseModule`` holds the loops shared by every module (``fit``, ``score``,
``predict``).
"""

from mxkit.train.module.base_module import BaseModule
from mxkit.train.module.executor_group import DataParallelExecutorGroup, ModuleError, split_input_slice
from mxkit.train.module.module import Module

__all__ = ["BaseModule", "DataParallelExecutorGroup", "Module", "ModuleError", "split_input_slice"]
