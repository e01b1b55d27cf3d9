"""MXNet's ``contrib.amp.amp`` functions.

``convert_symbol``, ``convert_model`` and ``convert_hybrid_block`` with ``target_dtype="bfloat16"`` rewrite a
graph for bfloat16 prediction (and training) on the CPU (:mod:`mxkit.mx.contrib.amp.convert`). The rest
(float16 loss scaling: ``init``, ``init_trainer``, ``scale_loss``, ``unscale``; float16 conversion;
bucketing modules) raises :class:`AMPNotSupportedError` saying what to do instead.
"""

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
            f"multi_precision=True on the optimizer; for bfloat16 on the CPU convert the graph with "
            f"mx.contrib.amp.convert_model(sym, arg_params, aux_params, target_dtype='bfloat16') (or convert_symbol)")
    function.__name__ = name
    function.__doc__ = f"MXNet's ``amp.{name}``: raises :class:`AMPNotSupportedError`."
    return function


init = _unsupported("init")
init_trainer = _unsupported("init_trainer")
scale_loss = _unsupported("scale_loss")
unscale = _unsupported("unscale")


def _bfloat16_only(name: str, target_dtype: Any) -> None:
    if str(target_dtype) != "bfloat16":
        raise AMPNotSupportedError(
            f"mx.contrib.amp.{name}: mxkit converts graphs to target_dtype='bfloat16' only (run on the CPU's "
            f"bfloat16 kernels), got target_dtype={target_dtype!r}; float16 mixed precision is not provided: "
            f"train in float32, or cast explicitly (NDArray.astype('float16'))")


def convert_symbol(sym: Any, target_dtype: str = "float16", target_dtype_ops: list[Any] | None = None,
                   fp32_ops: list[Any] | None = None, conditional_fp32_ops: list[Any] | None = None,
                   excluded_sym_names: list[Any] | None = None, data_names: list[Any] | None = None,
                   cast_optional_params: bool = False) -> Any:
    """``sym`` with casts inserted so that convolutions and inner products run in bfloat16 and the
    precision-sensitive operators (softmax, losses, reductions...) in float32, as MXNet's
    ``amp.convert_symbol`` does; see :mod:`mxkit.mx.contrib.amp.convert` for the rules.

    Parameters
    ----------
    sym : Symbol
        The float32 network.
    target_dtype : str
        ``"bfloat16"`` (MXNet's default, ``"float16"``, raises :class:`AMPNotSupportedError`).
    target_dtype_ops, fp32_ops, conditional_fp32_ops : list, optional
        Override the lists of :mod:`mxkit.mx.contrib.amp.lists_bf16` (MXNet's arguments).
    excluded_sym_names : list of str, optional
        Nodes that stay float32.
    data_names : list of str, optional
        The network's inputs (never stored in bfloat16 by ``cast_optional_params``).
    cast_optional_params : bool
        Declare the parameters read only by bfloat16 operators bfloat16 (``__dtype__``), so they are
        stored (and cast once) in bfloat16 rather than cast on every forward.

    Returns
    -------
    Symbol
    """
    _bfloat16_only("convert_symbol", target_dtype)
    from mxkit.mx.contrib.amp.convert import convert_symbol_bf16

    return convert_symbol_bf16(sym, target_dtype_ops, fp32_ops, conditional_fp32_ops, excluded_sym_names,
                               data_names, cast_optional_params)


def convert_model(sym: Any, arg_params: dict[str, Any], aux_params: dict[str, Any], target_dtype: str = "float16",
                  target_dtype_ops: list[Any] | None = None, fp32_ops: list[Any] | None = None,
                  conditional_fp32_ops: list[Any] | None = None, excluded_sym_names: list[Any] | None = None,
                  cast_optional_params: bool = False) -> tuple[Any, ...]:
    """:func:`convert_symbol` for a model: ``(symbol, arg_params, aux_params)``, the parameters in the dtypes
    the converted graph declares for them (bfloat16 with ``cast_optional_params``, float32 otherwise).
    The network's inputs are the arguments ``arg_params`` does not hold, as in MXNet."""
    _bfloat16_only("convert_model", target_dtype)
    data_names = [name for name in sym.list_arguments() if name not in arg_params]
    converted = convert_symbol(sym, target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops,
                               excluded_sym_names, data_names, cast_optional_params)
    declared = {}
    for name, attrs in converted.attr_dict().items():
        if "__dtype__" in attrs:
            from mxkit.core.dtypes import dtype_from_flag

            declared[name] = dtype_from_flag(int(attrs["__dtype__"]))

    def cast(params: dict[str, Any]) -> dict[str, Any]:
        return {name: value.astype(declared[name]) if name in declared and value.dtype != declared[name]
                else value for name, value in params.items()}

    return converted, cast(arg_params), cast(aux_params)




def convert_hybrid_block(block: Any, target_dtype: str = "float16", target_dtype_ops: list[Any] | None = None,
                         fp32_ops: list[Any] | None = None, conditional_fp32_ops: list[Any] | None = None,
                         excluded_sym_names: list[Any] | None = None, ctx: Any = None,
                         cast_optional_params: bool = False) -> Any:
    """A Gluon ``SymbolBlock`` running ``block`` (hybridized and called once, as ``export`` needs) converted by
    :func:`convert_model`, its parameters in the dtypes the converted graph declares, on ``ctx`` (the CPU
    when None)."""
    _bfloat16_only("convert_hybrid_block", target_dtype)
    import os
    import tempfile

    from mxkit.mx import gluon, model
    from mxkit.mx import sym as symbol

    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "block")
        block.export(prefix)
        graph, arg_params, aux_params = model.load_checkpoint(prefix, 0)
    converted, arg_params, aux_params = convert_model(graph, arg_params, aux_params, target_dtype, target_dtype_ops,
                                                      fp32_ops, conditional_fp32_ops, excluded_sym_names,
                                                      cast_optional_params)
    values = {**arg_params, **aux_params}
    inputs = [symbol.var(name) for name in converted.list_inputs() if name not in values]
    net = gluon.SymbolBlock(converted, inputs)
    params = net.collect_params()
    for name, value in values.items():
        param = params[name]
        param.cast(value.dtype)
        param.initialize(ctx=ctx)
        param.set_data(value)
    return net


convert_bucketing_module = _unsupported("convert_bucketing_module")

__all__ = ["AMPNotSupportedError", "convert_bucketing_module", "convert_hybrid_block", "convert_model",
           "convert_symbol", "init", "init_trainer", "scale_loss", "unscale"]
