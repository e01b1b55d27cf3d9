"""MXNet's ``contrib.amp.amp`` functions; each explains that mxkit has no automatic mixed precision."""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import MXKitError


class AMPNotSupportedError(MXKitError, NotImplementedError):
    """Automatic mixed precision (MXNet's ``contrib.amp``) is not provided by mxkit."""


def _unsupported(name: str) -> Any:
    def function(*args: Any, **kwargs: Any) -> Any:
        raise AMPNotSupportedError(
            f"mx.contrib.amp.{name}: automatic mixed precision is not provided by mxkit; train in float32, or "
            f"cast explicitly (Module(..., dtype) / mx.sym.Cast / NDArray.astype('float16')) with "
            f"multi_precision=True on the optimizer")
    function.__name__ = name
    function.__doc__ = f"MXNet's ``amp.{name}``: raises :class:`AMPNotSupportedError`."
    return function


init = _unsupported("init")
init_trainer = _unsupported("init_trainer")
scale_loss = _unsupported("scale_loss")
unscale = _unsupported("unscale")
convert_model = _unsupported("convert_model")
convert_symbol = _unsupported("convert_symbol")
convert_hybrid_block = _unsupported("convert_hybrid_block")
convert_bucketing_module = _unsupported("convert_bucketing_module")

__all__ = ["AMPNotSupportedError", "convert_bucketing_module", "convert_hybrid_block", "convert_model",
           "convert_symbol", "init", "init_trainer", "scale_loss", "unscale"]
