"""``mx.contrib.amp``: MXNet's automatic mixed precision, under its import path only.

mxkit does not rewrite graphs for mixed precision. The names exist so that code importing
them (``from mxnet.contrib import amp``, ``from mxnet.contrib.amp import amp``) still
imports; calling any of them raises :class:`AMPNotSupportedError` saying what to do instead.
"""

from mxkit.mx.contrib.amp import amp
from mxkit.mx.contrib.amp.amp import (
    AMPNotSupportedError,
    convert_bucketing_module,
    convert_hybrid_block,
    convert_model,
    convert_symbol,
    init,
    init_trainer,
    scale_loss,
    unscale,
)

__all__ = ["AMPNotSupportedError", "amp", "convert_bucketing_module", "convert_hybrid_block", "convert_model",
           "convert_symbol", "init", "init_trainer", "scale_loss", "unscale"]
