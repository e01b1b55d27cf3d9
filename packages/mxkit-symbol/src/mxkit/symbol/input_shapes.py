"""Backward shape rules: the shapes of an operator's inputs from what is already known.

The registry's ``infer_shape`` runs forward (input shapes to output shapes). MXNet's shape
inference also runs the other way, which is how ``simple_bind(data=(128, 784))`` learns
``fc1_weight`` is ``(128, 784)``: the parameter shapes follow from the data shape and the
operator's parameters. The rules here supply that direction for the operators that need
it, by MXNet operator name; each returns shapes only for inputs it can determine.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from mxkit.core.errors import ShapeError

Shape = tuple[int, ...]
Rule = Callable[[dict, list[Any], list[Any]], dict[int, Shape]]


def _positive(params: dict, name: str, what: str) -> int:
    # a 0 here would read as "unknown" in the weight's shape and fail later without a reason
    value = int(params[name])
    if value <= 0:
        raise ShapeError(f"{name}={value} must be a positive number of {what}")
    return value


def _fully_connected(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    if data is None:
        return {}
    hidden = _positive(params, "num_hidden", "output units")
    width = data[-1] if not params.get("flatten", True) else prod(data[1:])
    found = {1: (hidden, width)}
    if len(ins) > 2:
        found[2] = (hidden,)
    out = outs[0] if outs else None
    if out is not None and 0 in tuple(data) and len(data) == 2 and len(out) == 2:
        # a (0, H) begin state of an RNN cell takes its batch size from the output, as in MXNet
        found[0] = (out[0], data[1])
    return found


def _convolution(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    if data is None:
        return {}
    groups = params.get("num_group", 1) or 1
    layout = params.get("layout") or ""
    channels = data[-1] if layout.endswith("C") else data[1]
    filters = _positive(params, "num_filter", "output channels")
    found = {1: (filters, channels // groups, *params["kernel"])}
    if len(ins) > 2:
        found[2] = (filters,)
    return found


def _deconvolution(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    if data is None:
        return {}
    groups = params.get("num_group", 1) or 1
    filters = _positive(params, "num_filter", "output channels")
    found = {1: (data[1], filters // groups, *params["kernel"])}
    if len(ins) > 2:
        found[2] = (filters,)
    return found


def _per_channel(default_axis: int) -> Rule:
    def rule(params: dict, ins: list, outs: list) -> dict[int, Shape]:
        data = ins[0]
        if data is None:
            return {}
        axis = params.get("axis", default_axis)
        axis = default_axis if axis is None else axis
        channels = data[axis % len(data)]
        return {i: (channels,) for i in range(1, len(ins))}

    return rule


def _embedding(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    return {1: (params["input_dim"], params["output_dim"])}


def _softmax_label(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    if data is None:
        return {}
    if params.get("multi_output"):
        return {1: (data[0], *data[2:])}
    return {1: tuple(data[:-1])}


def _label_like_data(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    return {} if data is None else {1: tuple(data)}


def _prelu(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    if data is None or params.get("act_type") != "prelu" or len(ins) < 2:
        return {}
    gamma = ins[1]
    if gamma is not None and len(gamma) > 0 and all(int(d) > 0 for d in gamma):
        # a given slope shape stands: (1,) is one slope shared by every channel (Gluon's PReLU
        # default), as MXNet's inference keeps a known gamma and only fills in an unknown one
        return {}
    return {1: (data[1],)}


def _rnn(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    from mxkit.ndarray.ops.nn_rnn import rnn_input_shapes

    return rnn_input_shapes(params, ins, outs)


def _group_norm(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    # MXNet 1.9.1: one gamma and beta per group, not per channel
    return {i: (params.get("num_groups", 1),) for i in range(1, len(ins))}


def _one_label_per_sample(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    data = ins[0]
    return {} if data is None else {1: (data[0],)}


def _custom(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    # the registered property's infer_shape answers for every argument and auxiliary state
    from mxkit.ndarray.ops.nn_custom import infer_input_shapes

    return infer_input_shapes(params, ins)


RULES: dict[str, Rule] = {
    "FullyConnected": _fully_connected,
    "Convolution": _convolution,
    "Deconvolution": _deconvolution,
    "BatchNorm": _per_channel(1),
    "InstanceNorm": _per_channel(1),
    "LayerNorm": _per_channel(-1),
    "GroupNorm": _group_norm,
    "Embedding": _embedding,
    "SoftmaxOutput": _softmax_label,
    "LinearRegressionOutput": _label_like_data,
    "LogisticRegressionOutput": _label_like_data,
    "MAERegressionOutput": _label_like_data,
    "LeakyReLU": _prelu,
    "RNN": _rnn,
    "SVMOutput": _one_label_per_sample,
    "Custom": _custom,
}


def is_elementwise(op: Any) -> bool:
    """Whether every input and the output of ``op`` share one shape (shape flows both ways)."""
    qualname = getattr(op.infer_shape, "__qualname__", "")
    return qualname.startswith("elementwise_shape") or op.name.startswith("elemwise_")


def input_shapes(op: Any, params: dict, ins: list, outs: list) -> dict[int, Shape]:
    """Shapes of inputs of ``op`` known from its parameters, known inputs and outputs."""
    rule = RULES.get(op.name)
    if rule is not None:
        try:
            return rule(params, ins, outs)
        except (KeyError, IndexError, TypeError, ZeroDivisionError):
            return {}
    if is_elementwise(op):
        shapes = [s for s in list(ins) + list(outs[:1]) if s is not None]
        if shapes:
            # the most complete shape seen fills unknown inputs and the 0 dims of partial ones
            known = max(shapes, key=lambda s: sum(1 for d in s if int(d) > 0))
            return {i: tuple(known) for i, s in enumerate(ins)
                    if s is None or (len(s) == len(known) and 0 in tuple(s))}
    elif _shaped_like_first_input(op) and ins and ins[0] is None and outs and outs[0] is not None:
        return {0: tuple(outs[0])}
    return {}


def _shaped_like_first_input(op: Any) -> bool:
    """Unary operators whose output has the input's shape (``relu``, ``Activation``, ``softmax``)."""
    return getattr(op.infer_shape, "__qualname__", "") == "first_shape" and op.num_outputs == 1


__all__ = ["RULES", "input_shapes", "is_elementwise"]
