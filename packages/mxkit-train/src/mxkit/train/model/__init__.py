"""``mx.model``: MXNet 1.x's checkpoints and the ``FeedForward`` model.

``save_checkpoint``/``load_checkpoint`` read and write ``prefix-symbol.json`` and
``prefix-%04d.params`` exactly as MXNet 1.x does; ``FeedForward`` is the seed's model API
(``fit``, ``predict``, ``score``, ``save``, ``load``, ``create``), trained by a Module.
"""

from collections import namedtuple

from mxkit.train.model.checkpoint import CheckpointError, load_checkpoint, load_params, save_checkpoint
from mxkit.train.model.kvstore_sync import (
    _create_kvstore,
    _initialize_kvstore,
    _update_params,
    _update_params_on_kvstore,
)

BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])
BatchEndParam.__doc__ = """What batch-end and score-end callbacks receive: ``epoch``, ``nbatch``,
``eval_metric`` and the caller's ``locals``."""

from mxkit.train.model.feedforward import FeedForward  # noqa: E402  (needs BatchEndParam defined first)

__all__ = ["BatchEndParam", "CheckpointError", "FeedForward", "_create_kvstore", "_initialize_kvstore",
           "_update_params", "_update_params_on_kvstore", "load_checkpoint", "load_params", "save_checkpoint"]
