"""``mx.contrib.amp``: MXNet's automatic mixed precision, under its import path.

``convert_symbol``, ``convert_model`` and ``convert_hybrid_block`` with ``target_dtype="bfloat16"``
rewrite a graph so that its convolutions and inner products run in bfloat16 (oneDNN's bfloat16 kernels
where the CPU has them) and its precision-sensitive operators in float32. The other names (float16 loss
scaling, bucketing conversion) exist so that code importing them still imports; calling them raises
:class:`AMPNotSupportedError` saying what to do instead.
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
