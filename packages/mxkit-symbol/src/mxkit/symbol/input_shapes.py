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
    out = outs[0] if outs else None
    if out is not None and 0 in tuple(data) and not layout.endswith("C") and len(out) == len(data):
        found[0] = _conv_data_from_output(params, tuple(data), tuple(out))
    return found


def _conv_data_from_output(params: dict, data: Shape, out: Shape) -> Shape:
    """Fill a partial NCHW data shape from the output: batch, and each spatial size that stride 1 fixes."""
    kernel = tuple(params["kernel"])
    n = len(kernel)
    stride = tuple(params.get("stride") or ()) or (1,) * n
    pad = tuple(params.get("pad") or ()) or (0,) * n
    dilate = tuple(params.get("dilate") or ()) or (1,) * n
    filled = [data[0] or out[0], data[1]]
    for i in range(n):
        size = data[2 + i]
        if size == 0 and out[2 + i] > 0 and stride[i] == 1:
            # out = in + 2 pad - dilate (k - 1); with stride > 1 several input sizes give one output
            size = out[2 + i] - 2 * pad[i] + dilate[i] * (kernel[i] - 1)
        filled.append(max(size, 0))
    return tuple(filled)


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
    if data is None or (len(ins) > 1 and ins[1] is not None and tuple(ins[1]) == tuple(data)):
        return {}  # a label of the data's shape is a probability per class (soft labels)
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


def _concat(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    """Concat: every input shares the output's other dims; a lone unknown size along ``dim`` is the rest."""
    out = outs[0] if outs else None
    shapes = [s for s in [*ins, out] if s is not None]
    if not shapes:
        return {}
    ndim = len(shapes[0])
    if any(len(s) != ndim for s in shapes):
        return {}  # a rank conflict: the forward rule reports it
    axis = int(params.get("dim", 1)) % ndim
    common = [max(int(s[d]) for s in shapes) if d != axis else 0 for d in range(ndim)]
    found: dict[int, Shape] = {}
    sizes = [int(s[axis]) if s is not None else 0 for s in ins]
    if out is not None and int(out[axis]) > 0 and sizes.count(0) == 1:
        missing = sizes.index(0)
        sizes[missing] = int(out[axis]) - sum(sizes)
        if sizes[missing] <= 0:
            return {}
    for i, s in enumerate(ins):
        shape = tuple(sizes[i] if d == axis else common[d] for d in range(ndim))
        if s is None or tuple(int(x) for x in s) != shape:
            found[i] = shape
    return found


def _slice_channel(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    """SliceChannel/split: the input from any known output (its axis is ``num_outputs`` times longer)."""
    known = [tuple(o) for o in outs if o is not None]
    if not known or (ins[0] is not None and 0 not in tuple(ins[0])) or len({len(o) for o in known}) != 1:
        return {}
    out = tuple(max(int(o[d]) for o in known) for d in range(len(known[0])))  # every part has one shape
    count = int(params["num_outputs"])
    squeeze = bool(params.get("squeeze_axis", False))
    ndim = len(out) + (1 if squeeze else 0)
    axis = int(params.get("axis", 1)) % ndim
    shape = list(out)
    if squeeze:
        shape.insert(axis, count)
    else:
        shape[axis] = shape[axis] * count
    if ins[0] is not None and len(ins[0]) == ndim:
        shape = [int(g) or int(s) for g, s in zip(ins[0], shape)]
    return {0: tuple(shape)}


def _reshape(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    # a reshape keeps the size: with the output known, one unknown (0) input axis follows from it
    data, out = ins[0], outs[0] if outs else None
    if data is None or out is None or not all(int(d) > 0 for d in out):
        return {}
    data = [int(d) for d in data]
    if data.count(0) != 1:
        return {}
    known = prod(d for d in data if d)
    total = prod(int(d) for d in out)
    if known == 0 or total % known:
        return {}
    data[data.index(0)] = total // known
    return {0: tuple(data)}


def _upsampling(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    # bilinear: the weight of its Deconvolution, one group per filter: (channels, 1, k, k)
    if params.get("sample_type") != "bilinear" or ins[0] is None or len(ins[0]) != 4:
        return {}
    scale, filters = int(params["scale"]), int(params["num_filter"])
    kernel = 2 * scale - scale % 2
    channels = int(ins[0][1])
    if filters <= 0 or channels <= 0:
        return {}
    return {1: (channels, 1, kernel, kernel)}


def _custom(params: dict, ins: list, outs: list) -> dict[int, Shape]:
    # the registered property's infer_shape answers for every argument and auxiliary state
    from mxkit.ndarray.ops.nn_custom import infer_input_shapes

    return infer_input_shapes(params, ins)


def _deformable_convolution(modulated: bool) -> Rule:
    """The weight and bias from the data (inputs: data, offset, [mask], weight, [bias])."""

    def rule(params: dict, ins: list, outs: list) -> dict[int, Shape]:
        data = ins[0]
        if data is None:
            return {}
        filters = _positive(params, "num_filter", "output channels")
        weight = 3 if modulated else 2
        found = {weight: (filters, data[1] // (params.get("num_group", 1) or 1), *params["kernel"])}
        if len(ins) > weight + 1:
            found[weight + 1] = (filters,)
        return found

    return rule


RULES: dict[str, Rule] = {
    "_contrib_DeformableConvolution": _deformable_convolution(False),
    "_contrib_ModulatedDeformableConvolution": _deformable_convolution(True),
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
    "Concat": _concat,
    "SliceChannel": _slice_channel,
    "Reshape": _reshape,
    "UpSampling": _upsampling,
}


def _concat_partial_output(params: dict, ins: list) -> list[Shape]:
    """Concat's output while some input sizes are unknown (0): its size along ``dim`` is unknown too."""
    first = tuple(int(d) for d in ins[0])
    axis = int(params.get("dim", 1)) % len(first)
    other = [max(int(s[d]) for s in ins) for d in range(len(first))]
    sizes = [int(s[axis]) for s in ins]
    other[axis] = 0 if 0 in sizes else sum(sizes)
    return [tuple(other)]


#: forward rules for partially known inputs (0 = unknown), where the registry's rule, made for
#: real sizes, would read an unknown 0 as an empty axis
PARTIAL_FORWARD: dict[str, Callable[[dict, list[Any]], list[Shape]]] = {"Concat": _concat_partial_output}


def is_elementwise(op: Any) -> bool:
    """Whether every input and the output of ``op`` share one shape (shape flows both ways)."""
    qualname = getattr(op.infer_shape, "__qualname__", "")
    return qualname.startswith("elementwise_shape") or op.name.startswith("elemwise_")


def input_shapes(op: Any, params: dict, ins: list, outs: list) -> dict[int, Shape]:
    """Shapes of inputs of ``op`` known from its parameters, known inputs and outputs."""
    if op.name == "_foreach":
        from mxkit.symbol.control_flow import input_shapes_rule

        return input_shapes_rule(params, ins, outs)
    rule = RULES.get(op.name)
    if rule is not None:
        try:
            return rule(params, ins, outs)
        except (KeyError, IndexError, TypeError, ZeroDivisionError):
            return {}
    if is_elementwise(op):
        shapes = [s for s in list(ins) + list(outs[:1]) if s is not None]
        if shapes:
            # the shapes seen fill unknown inputs and each other's 0 dims, dimension by dimension
            known = max(shapes, key=lambda s: sum(1 for d in s if int(d) > 0))
            same_rank = [s for s in shapes if len(s) == len(known)]
            known = tuple(max(int(s[d]) for s in same_rank) for d in range(len(known)))
            return {i: tuple(known) for i, s in enumerate(ins)
                    if s is None or (len(s) == len(known) and 0 in tuple(s))}
    elif _shaped_like_first_input(op) and ins and ins[0] is None and outs and outs[0] is not None:
        return {0: tuple(outs[0])}
    return {}


def _shaped_like_first_input(op: Any) -> bool:
    """Unary operators whose output has the input's shape (``relu``, ``Activation``, ``softmax``)."""
    return getattr(op.infer_shape, "__qualname__", "") == "first_shape" and op.num_outputs == 1


__all__ = ["PARTIAL_FORWARD", "RULES", "input_shapes", "is_elementwise"]
