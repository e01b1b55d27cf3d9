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
from mxkit.ndarray.invoke import invoke, resolve_context
from mxkit.ndarray.params import ParamError
from mxkit.ndarray.registry import OpDef, get_registry

_SPECIAL_KWARGS = ("out", "name", "ctx")


def call(op_name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    """Call operator ``op_name`` with MXNet's calling convention (see the module docstring)."""
    from mxkit.ndarray.ndarray import NDArray

    op = get_registry().get(op_name)
    out = kwargs.pop("out", None)
    kwargs.pop("name", None)
    ctx = kwargs.pop("ctx", None)
    variadic = callable(op.num_inputs)
    inputs: list[Any] = []
    rest = list(args)
    while rest and isinstance(rest[0], NDArray):
        inputs.append(rest.pop(0))
    if variadic:
        if rest and isinstance(rest[0], (list, tuple)) and rest[0] and isinstance(rest[0][0], NDArray):
            inputs.extend(rest.pop(0))
        count_key = "num_args" if "num_args" in op.params else None
        if count_key and count_key not in kwargs:
            kwargs[count_key] = len(inputs)
    else:
        named = op.list_inputs({}) + op.aux_names
        for name in named[len(inputs):]:
            if name in kwargs:
                inputs.append(kwargs.pop(name))
            elif rest:
                inputs.append(rest.pop(0))  # not an NDArray: reported below
            else:
                break
    param_names = [n for n in op.params.names() if n not in kwargs]
    if len(rest) > len(param_names):
        raise ParamError(f"operator {op.name} got {len(rest)} positional parameters {rest!r}; "
                         f"it takes its inputs and then at most {len(param_names)}: {', '.join(param_names)}")
    for name, value in zip(param_names, rest):
        kwargs[name] = value
    for value in inputs:
        if not isinstance(value, NDArray):
            raise MXKitError(f"operator {op.name}: inputs must be NDArrays, got {type(value).__name__} "
                             f"({value!r}); convert it with mx.nd.array()")
    params = op.parse_params(kwargs)
    expected = op.count_inputs(params) + len(op.aux_names)
    if len(inputs) != expected:
        names = ", ".join(op.list_inputs(params) + op.aux_names)
        raise MXKitError(f"operator {op.name} takes {expected} input arrays ({names}), got {len(inputs)}")
    outputs = invoke(op, inputs, params, out=out, ctx=resolve_context(ctx) if ctx is not None else None)
    return outputs[0] if len(outputs) == 1 else outputs


def make_function(name: str, op: OpDef) -> Any:
    """The ``mx.nd.<name>`` function of operator ``op``."""

    def function(*args: Any, **kwargs: Any) -> Any:
        return call(name, args, kwargs)

    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = op.docstring()
    parameters: list[inspect.Parameter] = []
    if callable(op.num_inputs):
        parameters.append(inspect.Parameter("data", inspect.Parameter.VAR_POSITIONAL))
    else:
        parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
                       for n in op.list_inputs({})]
    kind = inspect.Parameter.KEYWORD_ONLY if callable(op.num_inputs) else inspect.Parameter.POSITIONAL_OR_KEYWORD
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
