"""``Custom`` and ``_backward_Custom``: operators defined in Python through ``mx.operator``.

Everything about a ``Custom`` node comes from the property registered under its
``op_type`` (:mod:`mxkit.ndarray.operator`): input, output and auxiliary state names,
shapes, dtypes, whether it is a loss layer (``need_top_grad=False``). Both operators run
through ``async_kernel`` (the user's code runs on the custom-operator threads, see that
module). The backward node reads the output gradients (unless the operator is a loss
layer), the inputs, the outputs and the auxiliary states, and writes one gradient per
argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxkit.core.errors import DTypeError, ShapeError
from mxkit.ndarray.ops.nn_common import public
from mxkit.ndarray.params import Param, ParamError, ParamSchema
from mxkit.ndarray.registry import OpDef, define


class CustomParamSchema(ParamSchema):
    """``op_type`` plus any keyword arguments, kept as strings (MXNet passes them to the
    property's ``__init__`` as strings)."""

    def parse(self, values: Mapping[str, Any], op_name: str) -> dict[str, Any]:
        from mxkit.ndarray.operator import prop_class

        out: dict[str, Any] = {}
        for name, value in values.items():
            if name.startswith("_"):
                continue  # free-form __attributes__ and private entries are not the property's
            out[name] = value if isinstance(value, str) else str(value)
        if "op_type" not in out:
            raise ParamError(f"operator {op_name} needs parameter 'op_type': the name a CustomOpProp was "
                             f"registered under with @mx.operator.register(name)")
        prop_class(out["op_type"])  # an unknown op_type fails here, at the call that names it
        return out

    def to_strings(self, typed: Mapping[str, Any], include_defaults: bool = False) -> dict[str, str]:
        return {k: str(v) for k, v in typed.items() if not k.startswith("_")}


_SCHEMA = CustomParamSchema((Param("op_type", "str", doc="The name the CustomOpProp was registered under."),))


def _prop(params: dict):
    from mxkit.ndarray.operator import prop_for

    return prop_for(params)


def _names(params: dict, method: str) -> tuple[str, ...]:
    from mxkit.ndarray.operator import call_prop

    prop = _prop(params)
    names = call_prop(params["op_type"], method, getattr(prop, method))
    return tuple(str(n) for n in names)


def _arguments(params: dict) -> tuple[str, ...]:
    return _names(params, "list_arguments")


def _outputs(params: dict) -> tuple[str, ...]:
    return _names(params, "list_outputs")


def _auxiliary(params: dict) -> tuple[str, ...]:
    return _names(params, "list_auxiliary_states")


def _needs_top_grad(params: dict) -> bool:
    return bool(_prop(params).need_top_grad_)


def _counted(op_type: str, what: str, values: Any, names: tuple[str, ...]) -> list:
    values = list(values)
    if len(values) != len(names):
        raise ShapeError(f"Custom op_type {op_type!r}: {what} has {len(values)} entries, but the operator has "
                         f"{len(names)} ({', '.join(names) or 'none'}); return one per name")
    return values


def prop_shapes(params: dict, arg_shapes: list) -> tuple[list, list, list]:
    """The property's ``infer_shape`` on the argument shapes, checked: (args, outputs, aux)."""
    from mxkit.ndarray.operator import call_prop

    op_type = params["op_type"]
    prop = _prop(params)
    result = call_prop(op_type, "infer_shape", prop.infer_shape, [list(s) for s in arg_shapes])
    if not isinstance(result, (list, tuple)) or len(result) not in (2, 3):
        raise ShapeError(f"Custom op_type {op_type!r}: infer_shape returned {result!r}; it must return "
                         f"(argument shapes, output shapes[, auxiliary shapes])")
    args = _counted(op_type, "infer_shape's argument shapes", result[0], _arguments(params))
    outs = _counted(op_type, "infer_shape's output shapes", result[1], _outputs(params))
    aux = _counted(op_type, "infer_shape's auxiliary shapes", result[2] if len(result) == 3 else (),
                   _auxiliary(params))
    try:
        return ([tuple(int(d) for d in s) for s in args], [tuple(int(d) for d in s) for s in outs],
                [tuple(int(d) for d in s) for s in aux])
    except (TypeError, ValueError):
        raise ShapeError(f"Custom op_type {op_type!r}: infer_shape returned {result!r}, which holds "
                         f"something that is not a shape (a tuple of ints)") from None


def _infer_shape(params: dict, in_shapes: list) -> list:
    count = len(_arguments(params))
    given = [tuple(int(d) for d in s) for s in in_shapes[:count]]
    args, outs, _aux = prop_shapes(params, given)
    for name, want, got in zip(_arguments(params), args, given):
        if got and want != got:
            raise ShapeError(f"Custom op_type {params['op_type']!r}: input {name!r} has shape {got}, but "
                             f"infer_shape says it must be {want}")
    return outs


def infer_input_shapes(params: dict, ins: list) -> dict[int, tuple]:
    """Shapes of the arguments and auxiliary states that the property derives from the known
    ones (``label`` from ``data``); ``{}`` while it cannot tell (symbol inference's backward rule)."""
    count = len(_arguments(params))
    if not ins or ins[0] is None:
        return {}
    try:
        args, _outs, aux = prop_shapes(params, [list(s) if s is not None else [] for s in ins[:count]])
    except Exception:  # partial shapes the property cannot handle yet
        return {}
    return {i: s for i, s in enumerate(args + aux) if i < len(ins) and ins[i] is None and all(d > 0 for d in s)}


def _infer_dtype(params: dict, in_dtypes: list) -> list:
    import numpy as np
    from mxkit.core.dtypes import dtype_name
    from mxkit.ndarray.operator import call_prop

    op_type = params["op_type"]
    count = len(_arguments(params))
    prop = _prop(params)
    types = [np.dtype(d).type for d in in_dtypes[:count]]
    result = call_prop(op_type, "infer_type", prop.infer_type, types)
    if not isinstance(result, (list, tuple)) or len(result) not in (2, 3):
        raise DTypeError(f"Custom op_type {op_type!r}: infer_type returned {result!r}; it must return "
                         f"(argument types, output types[, auxiliary types])")
    outs = list(result[1])
    if len(outs) != len(_outputs(params)):
        raise DTypeError(f"Custom op_type {op_type!r}: infer_type gave {len(outs)} output types for "
                         f"{len(_outputs(params))} outputs ({', '.join(_outputs(params))})")
    return [dtype_name(t) for t in outs]


def _forward_async(ctx: Any, inputs: list, outputs: list, params: dict, on_complete: Any) -> None:
    from mxkit.ndarray.invoke import dtype_name_of, engine
    from mxkit.ndarray.operator import operator_instance, run_off_engine, settle, wrap_arrays

    op_type = params["op_type"]

    def job() -> None:
        prop = _prop(params)
        count = len(_arguments(params))
        eng = engine()
        in_data = wrap_arrays(ctx, inputs[:count], eng)
        aux = wrap_arrays(ctx, inputs[count:], eng)
        out_data = wrap_arrays(ctx, outputs, eng)
        instance = operator_instance(prop, op_type, ctx, outputs[0], [list(a.shape) for a in inputs[:count]],
                                     [dtype_name_of(a.dtype) for a in inputs[:count]])
        req = list(params.get("_req") or ("write",) * len(outputs))
        instance.forward(bool(params.get("_is_train", False)), req, in_data, out_data, aux)
        settle(in_data + aux + out_data, eng)

    run_off_engine(job, op_type, "forward", on_complete)


def _backward_async(ctx: Any, inputs: list, outputs: list, params: dict, on_complete: Any) -> None:
    from mxkit.ndarray.invoke import dtype_name_of, engine
    from mxkit.ndarray.operator import operator_instance, run_off_engine, settle, wrap_arrays

    op_type = params["op_type"]

    def job() -> None:
        prop = _prop(params)
        n_args, n_out = len(_arguments(params)), len(_outputs(params))
        eng = engine()
        position = 0
        if prop.need_top_grad_:
            out_grad = wrap_arrays(ctx, inputs[:n_out], eng)
            position = n_out
        in_buffers = inputs[position:position + n_args]
        out_buffers = inputs[position + n_args:position + n_args + n_out]
        in_data = wrap_arrays(ctx, in_buffers, eng)
        out_data = wrap_arrays(ctx, out_buffers, eng)
        aux = wrap_arrays(ctx, inputs[position + n_args + n_out:], eng)
        if not prop.need_top_grad_:
            # a loss layer reads no head gradient; MXNet still hands it arrays of the output shapes
            out_grad = wrap_arrays(ctx, [b * 0 for b in out_buffers], eng)
        in_grad = wrap_arrays(ctx, outputs, eng)
        instance = operator_instance(prop, op_type, ctx, out_buffers[0], [list(a.shape) for a in in_buffers],
                                     [dtype_name_of(a.dtype) for a in in_buffers])
        req = list(params.get("_req") or ("write",) * len(outputs))
        instance.backward(req, out_grad, in_data, out_data, in_grad, aux)
        settle(out_grad + in_data + out_data + aux + in_grad, eng)

    run_off_engine(job, op_type, "backward", on_complete)


def _must_run_async(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit.ndarray.operator import CustomOpError

    raise CustomOpError(f"Custom op_type {params.get('op_type')!r} runs as an asynchronous engine operation "
                        f"(OpDef.async_kernel); its kernel cannot be called directly")


def _gradient(F, params, inputs, outputs, out_grads):
    count = len(_arguments(params))
    heads = list(out_grads) if _needs_top_grad(params) else []
    grads = F("_backward_Custom", *heads, *inputs[:count], *outputs, *inputs[count:], **public(params))
    # one argument: F returns the gradient itself (a graph entry is a tuple, so no as_list)
    grads = [grads] if count == 1 else list(grads)
    return grads + [None] * (len(inputs) - count)


def _backward_inputs(params: dict) -> tuple[str, ...]:
    outs = _outputs(params)
    heads = tuple(f"{name}_grad" for name in outs) if _needs_top_grad(params) else ()
    return heads + _arguments(params) + outs + _auxiliary(params)


def _backward_shape(params: dict, in_shapes: list) -> list:
    offset = len(_outputs(params)) if _needs_top_grad(params) else 0
    return [tuple(s) for s in in_shapes[offset:offset + len(_arguments(params))]]


def _backward_dtype(params: dict, in_dtypes: list) -> list:
    offset = len(_outputs(params)) if _needs_top_grad(params) else 0
    return list(in_dtypes[offset:offset + len(_arguments(params))])


define(OpDef(
    name="Custom", params=_SCHEMA, infer_shape=_infer_shape, infer_dtype=_infer_dtype, kernel=_must_run_async,
    async_kernel=_forward_async,
    num_inputs=lambda p: len(_arguments(p)), input_names=_arguments,
    num_outputs=lambda p: len(_outputs(p)), output_names=_outputs, aux_names=_auxiliary,
    gradient=_gradient,
    is_loss=lambda params: not _needs_top_grad(params),  # need_top_grad=False: a loss layer
    doc="A Python operator registered with @mx.operator.register(op_type); other keyword arguments go to "
        "its CustomOpProp's __init__ as strings.",
))

define(OpDef(
    name="_backward_Custom", params=_SCHEMA, infer_shape=_backward_shape, infer_dtype=_backward_dtype,
    kernel=_must_run_async, async_kernel=_backward_async,
    num_inputs=lambda p: len(_backward_inputs(p)), input_names=_backward_inputs,
    num_outputs=lambda p: len(_arguments(p)), output_names=_arguments,
    doc="Backward of Custom: the CustomOp's backward() writes one gradient per argument.",
))
