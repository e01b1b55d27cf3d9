"""``mx.nd.<Op>`` functions generated from the operator registry.

Each function takes the operator's inputs positionally (or by their names: ``data``,
``lhs``...), then its parameters positionally in schema order or by keyword, plus
``out=`` and, for operators without inputs, ``ctx=``. Its docstring is generated from
the operator definition.
"""

from __future__ import annotations

import inspect
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray.autograd import _state as _autograd_state
from mxkit.ndarray.invoke import invoke, remember, resolve_context
from mxkit.ndarray.params import ParamError
from mxkit.ndarray.registry import OpDef, get_registry
from mxkit.ndarray.sparse_base import BaseSparseNDArray

_SPECIAL_KWARGS = ("out", "name", "ctx")


_NDArray: Any = None
#: operators whose imperative result is sparse even for dense inputs (their graph forms are dense)
_STORAGE_OPERATORS = frozenset({"cast_storage", "_sparse_retain"})
#: what counts as an array input: NDArray and the sparse arrays (set with _NDArray)
_ARRAY_TYPES: Any = (BaseSparseNDArray,)
_same_shape_elementwise: Any = None  # mxkit.ndarray.ndarray's, imported with NDArray (no import cycle)
_NO_PARAMS: Any = None  # (likewise)
#: names of the operators whose plain calls take the elementwise fast path (filled by _info)
_plain_unary: set[str] = set()
# op name -> (op, variadic, input names incl. aux, param names, counts num_args)
_call_info: dict[str, tuple[OpDef, bool, tuple[str, ...], tuple[str, ...], bool]] = {}


def _info(op_name: str) -> tuple[OpDef, bool, tuple[str, ...], tuple[str, ...], bool]:
    global _NDArray, _same_shape_elementwise, _NO_PARAMS, _ARRAY_TYPES
    if _NDArray is None:
        from mxkit.ndarray.ndarray import _NO_PARAMS, NDArray, _same_shape_elementwise

        _NDArray = NDArray
        _ARRAY_TYPES = (NDArray, BaseSparseNDArray)
    op = get_registry().get(op_name)
    variadic = callable(op.num_inputs)
    named = () if variadic else tuple(op.list_inputs({})) + tuple(op.list_aux({}))
    info = (op, variadic, named, tuple(op.params.names()), "num_args" in op.params)
    _call_info[op_name] = info
    if _is_plain_unary(op, variadic):
        _plain_unary.add(op_name)
    return info


def _is_plain_unary(op: OpDef, variadic: bool) -> bool:
    """Whether ``op`` maps one array to one of its shape and dtype, with no parameters
    (``relu``, ``exp``, ``sqrt``...): such calls can skip inference (see :func:`call`)."""
    from mxkit.ndarray.ops._helpers import first_shape
    from mxkit.ndarray.registry import same_dtype_as_first

    return (not variadic and op.num_inputs == 1 and op.num_outputs == 1 and not op.params.names()
            and not op.aux_names and not op.needs_rng and op.infer_shape is first_shape
            and op.infer_dtype is same_dtype_as_first)


def call(op_name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    """Call operator ``op_name`` with MXNet's calling convention (see the module docstring)."""
    op, variadic, named, all_param_names, counts_args = _call_info.get(op_name) or _info(op_name)
    NDArray = _NDArray
    if not kwargs and len(args) == 1 and type(args[0]) is NDArray and op_name in _plain_unary \
            and not _autograd_state.recording:
        return _same_shape_elementwise(op, [args[0]], _NO_PARAMS)  # mx.nd.relu(x): the hot path of a + b
    out = kwargs.pop("out", None) if kwargs else None
    ctx = None
    if kwargs:
        kwargs.pop("name", None)
        ctx = kwargs.pop("ctx", None)
    inputs: list[Any] = []
    rest = list(args)
    while rest and isinstance(rest[0], _ARRAY_TYPES):
        inputs.append(rest.pop(0))
    if variadic:
        if rest and isinstance(rest[0], (list, tuple)) and rest[0] and isinstance(rest[0][0], _ARRAY_TYPES):
            inputs.extend(rest.pop(0))
        if counts_args:
            if "num_args" not in kwargs:
                kwargs["num_args"] = len(inputs)
        elif kwargs and any(k not in all_param_names for k in kwargs):
            _take_named_inputs(op, all_param_names, inputs, kwargs)
    else:
        for name in named[len(inputs):]:
            if name in kwargs:
                inputs.append(kwargs.pop(name))
            elif rest:
                inputs.append(rest.pop(0))  # not an NDArray: reported below
            else:
                break
    if rest:
        param_names = [n for n in all_param_names if n not in kwargs]
        if len(rest) > len(param_names):
            raise ParamError(f"operator {op.name} got {len(rest)} positional parameters {rest!r}; it takes its "
                             f"inputs and then at most {len(param_names)}: {', '.join(param_names)}")
        for name, value in zip(param_names, rest):
            kwargs[name] = value
    sparse_call = out is not None and isinstance(out, BaseSparseNDArray)
    for value in inputs:
        if not isinstance(value, NDArray):
            if isinstance(value, BaseSparseNDArray):
                sparse_call = True
                continue
            raise MXKitError(f"operator {op.name}: inputs must be NDArrays, got {type(value).__name__} "
                             f"({value!r}); convert it with mx.nd.array()")
    if sparse_call or op.name in _STORAGE_OPERATORS or (kwargs and "forward_stype" in kwargs):
        from mxkit.ndarray.sparse_ops import apply_operator

        # sparse inputs: the operator's sparse form, or the dense operator on the dense values
        return apply_operator(op.name, inputs, dict(kwargs), out=out)
    params = _parsed_params(op, kwargs)
    expected = op.count_inputs(params) + len(op.list_aux(params))
    if len(inputs) != expected:
        names = ", ".join(op.list_inputs(params) + op.list_aux(params))
        raise MXKitError(f"operator {op.name} takes {expected} input arrays ({names}), got {len(inputs)}")
    outputs = invoke(op, inputs, params, out=out, ctx=resolve_context(ctx) if ctx is not None else None)
    return outputs[0] if len(outputs) == 1 else outputs


#: (operator name, then each keyword parameter's name, type and value) -> typed parameters
_parsed: dict[tuple, dict[str, Any]] = {}
_PARSED_LIMIT = 4096


def _parsed_params(op: OpDef, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``op.parse_params(kwargs)``, remembered for hashable values (a loop passes the same ones);
    each call gets its own copy of the typed dict."""
    try:
        key = (op.name, *kwargs.items(), *map(type, kwargs.values()))  # 1 and True hash alike
        typed = _parsed.get(key)
    except TypeError:  # an unhashable value (a list): parse every time
        return op.parse_params(kwargs)
    if typed is None:
        typed = op.parse_params(kwargs)
        remember(_parsed, key, typed, _PARSED_LIMIT)
    return dict(typed)


def _take_named_inputs(op: OpDef, param_names: tuple[str, ...], inputs: list, kwargs: dict[str, Any]) -> None:
    """Move inputs given by name (``FullyConnected(data=x, weight=w, bias=b, ...)``) from ``kwargs``
    to ``inputs``, for an operator whose input names depend on its parameters (``no_bias``)."""
    try:
        params = op.parse_params({k: v for k, v in kwargs.items() if k in param_names})
        names = tuple(op.list_inputs(params)) + tuple(op.list_aux(params))
    except MXKitError:
        return  # the parameters are wrong: parsing them again below reports it
    for name in names[len(inputs):]:
        if name not in kwargs:
            break
        inputs.append(kwargs.pop(name))


def _input_names_by_default(op: OpDef) -> tuple[str, ...] | None:
    """The input names of an operator whose count depends on parameters, with default parameters."""
    if "num_args" in op.params:
        return None
    try:
        return tuple(op.list_inputs({p.name: p.default for p in op.params}))
    except Exception:  # a count that needs a required parameter: no fixed names to show
        return None


def make_function(name: str, op: OpDef) -> Any:
    """The ``mx.nd.<name>`` function of operator ``op``."""

    def function(*args: Any, **kwargs: Any) -> Any:
        return call(name, args, kwargs)

    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = op.docstring()
    parameters: list[inspect.Parameter] = []
    default_names = _input_names_by_default(op) if callable(op.num_inputs) else None
    if default_names is not None:
        parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
                       for n in default_names]
    elif callable(op.num_inputs):
        parameters.append(inspect.Parameter("data", inspect.Parameter.VAR_POSITIONAL))
    else:
        parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
                       for n in op.list_inputs({})]
    kind = inspect.Parameter.KEYWORD_ONLY if callable(op.num_inputs) else inspect.Parameter.POSITIONAL_OR_KEYWORD
    if default_names is not None:
        kind = inspect.Parameter.KEYWORD_ONLY  # parameters come after a variable number of inputs
    for param in op.params:
        parameters.append(inspect.Parameter(param.name, kind,
                                            default=None if param.required else param.default))
    parameters += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in _SPECIAL_KWARGS]
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return function


def generate(namespace: dict[str, Any]) -> list[str]:
    """Add a function per operator name and alias into ``namespace`` (not overwriting); return the names."""
    registry = get_registry()
    added = []
    for name in registry.names(include_aliases=True):
        if name in namespace:
            continue
        namespace[name] = make_function(name, registry.get(name))
        added.append(name)
    return added


__all__ = ["call", "generate", "make_function"]
