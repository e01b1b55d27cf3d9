"""``mx.mod`` / ``mx.module``: MXNet 1.x's module API.

``Module`` binds a symbol over one or several devices (``DataParallelExecutorGroup``),
initialises its parameters, runs an optimizer locally or through a KVStore, and trains
with ``fit``; ``BaseModule`` holds the loops shared by every module (``fit``, ``score``,
``predict``); ``BucketingModule`` keeps one Module per bucket key (sequence length), all
sharing the default bucket's parameters.
"""

from mxkit.train.module.base_module import BaseModule
from mxkit.train.module.bucketing_module import BucketingModule
from mxkit.train.module.executor_group import DataParallelExecutorGroup, ModuleError, split_input_slice
from mxkit.train.module.module import Module

__all__ = ["BaseModule", "BucketingModule", "DataParallelExecutorGroup", "Module", "ModuleError", "split_input_slice"]
