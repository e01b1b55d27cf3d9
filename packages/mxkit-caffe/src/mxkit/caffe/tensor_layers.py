"""Converters of the layers that reshape, split, join and normalise over tensors (no weights).

Concat, Eltwise, Flatten, Reshape, Softmax, SoftmaxWithLoss, Slice, Crop and Split.
"""

from __future__ import annotations

from typing import Any

from mxkit.caffe.layer_spec import Converted, LayerSpec, axis_value, bounded, symbol_module

# the converters build symbols through mxkit.symbol, imported when the first one runs
_sym = symbol_module


def convert_concat(spec: LayerSpec) -> Converted:
    param = spec.layer.concat_param
    axis = axis_value(spec, param.concat_dim if param.HasField("concat_dim") else param.axis)
    if len(spec.inputs) == 1:
        return Converted([spec.inputs[0]])
    return Converted([_sym().Concat(*spec.inputs, name=spec.name, dim=axis, num_args=len(spec.inputs))])


def convert_eltwise(spec: LayerSpec) -> Converted:
    param = spec.layer.eltwise_param
    pb = type(param)
    sym = _sym()
    inputs = spec.inputs
    coeffs = list(param.coeff)
    if coeffs and (param.operation != pb.SUM or len(coeffs) != len(inputs)):
        raise spec.fail(f"coeff={coeffs} needs operation SUM and one coefficient per bottom ({len(inputs)})")
    if len(inputs) < 2:
        raise spec.fail(f"Eltwise needs at least 2 bottoms, got {len(inputs)}")
    if param.operation == pb.SUM:
        if coeffs and any(c != 1 for c in coeffs):
            inputs = [x if c == 1 else sym._mul_scalar(x, scalar=float(c), name=f"{spec.name}_coeff{i}")
                      for i, (x, c) in enumerate(zip(inputs, coeffs))]
        op_name = "elemwise_add"
    elif param.operation == pb.PROD:
        op_name = "elemwise_mul"
    else:  # MAX
        op_name = "_maximum"
    out = inputs[0]
    for index, other in enumerate(inputs[1:], start=1):
        name = spec.name if index == len(inputs) - 1 else f"{spec.name}_{index}"
        out = getattr(sym, op_name)(out, other, name=name)
    return Converted([out])


def convert_flatten(spec: LayerSpec) -> Converted:
    param = spec.layer.flatten_param
    axis, end_axis = axis_value(spec, param.axis), axis_value(spec, param.end_axis, "end_axis")
    sym = _sym()
    if end_axis != -1 or axis < 1:
        raise spec.fail(f"axis={axis}, end_axis={end_axis}: only flattening from an axis >= 1 to the last one "
                        f"is supported")
    if axis == 1:
        return Converted([sym.Flatten(spec.inputs[0], name=spec.name)])
    return Converted([sym.Reshape(spec.inputs[0], name=spec.name, shape=(0,) * axis + (-1,))])


def convert_reshape(spec: LayerSpec) -> Converted:
    param = spec.layer.reshape_param
    dims = [int(d) for d in param.shape.dim]
    for d in dims:
        if not -1 <= d < (1 << 31):
            raise spec.fail(f"shape dim {d} must be -1 (infer), 0 (copy) or positive")
    if dims.count(-1) > 1:
        raise spec.fail(f"shape {dims} may infer (-1) only one dimension")
    axis, num_axes = axis_value(spec, param.axis), int(param.num_axes)
    if axis < 0:
        raise spec.fail(f"axis={axis}: only a non-negative axis is supported")
    # Caffe's 0 and -1 mean what MXNet's Reshape codes 0 and -1 mean; the axes before `axis` are
    # copied, and those after the replaced range (-2: all the rest) when the range has len(dims) axes
    if num_axes == -1:
        shape = (0,) * axis + tuple(dims)
    elif num_axes == len(dims):
        shape = (0,) * axis + tuple(dims) + (-2,)
    else:
        raise spec.fail(f"num_axes={num_axes} with {len(dims)} new dims: only num_axes=-1 or num_axes equal to "
                        f"the number of dims is supported")
    return Converted([_sym().Reshape(spec.inputs[0], name=spec.name, shape=shape)])


def convert_softmax(spec: LayerSpec) -> Converted:
    axis = axis_value(spec, spec.layer.softmax_param.axis)
    return Converted([_sym().softmax(spec.inputs[0], name=spec.name, axis=axis)])


def convert_softmax_with_loss(spec: LayerSpec) -> Converted:
    layer = spec.layer
    if len(spec.inputs) != 2:
        raise spec.fail(f"SoftmaxWithLoss needs 2 bottoms (scores and labels), got {len(spec.inputs)}")
    if layer.softmax_param.axis != 1:
        raise spec.fail(f"softmax axis={layer.softmax_param.axis}: only axis 1 is supported")
    loss = layer.loss_param
    pb = type(loss)
    # multi_output: softmax over axis 1 whatever the rank, labels shaped as the data without axis 1
    options: dict[str, Any] = {"multi_output": True}
    if loss.HasField("ignore_label"):
        options.update(use_ignore=True, ignore_label=float(loss.ignore_label))
    normalization = loss.normalization
    if loss.HasField("normalize") and not loss.HasField("normalization"):
        normalization = pb.VALID if loss.normalize else pb.BATCH_SIZE
    # Caffe divides the loss by: FULL every label, VALID the labels not ignored, BATCH_SIZE the
    # batch size, NONE nothing; MXNet's 'valid' counts labels other than ignore_label (every
    # label when none is ignored), 'batch' the batch size, 'null' nothing
    options["normalization"] = {pb.FULL: "valid", pb.VALID: "valid", pb.BATCH_SIZE: "batch",
                                pb.NONE: "null"}[normalization]
    if normalization == pb.FULL and loss.HasField("ignore_label"):
        raise spec.fail("normalization FULL with ignore_label (dividing by every label, ignored ones too) has no "
                        "MXNet counterpart; use VALID")
    if len(layer.loss_weight):
        options["grad_scale"] = float(layer.loss_weight[0])
    return Converted([_sym().SoftmaxOutput(spec.inputs[0], spec.inputs[1], name=spec.name, **options)])


def convert_slice(spec: LayerSpec) -> Converted:
    param = spec.layer.slice_param
    axis = axis_value(spec, param.slice_dim if param.HasField("slice_dim") else param.axis)
    tops = len(spec.layer.top)
    points = [int(p) for p in param.slice_point]
    sym = _sym()
    if not points:
        if tops == 1:
            return Converted([spec.inputs[0]])
        out = sym.SliceChannel(spec.inputs[0], name=spec.name, num_outputs=tops, axis=axis)
        return Converted([out[i] for i in range(tops)])
    if len(points) != tops - 1:
        raise spec.fail(f"slice_point={points} must give one point fewer than the {tops} tops")
    if any(not 0 < p < (1 << 31) for p in points) or points != sorted(set(points)):
        raise spec.fail(f"slice_point={points} must be positive and increasing")
    # the last slice runs to the end: MXNet's JSON must say end "None" (an absent end does not load)
    bounds = [0, *points, "None"]
    outputs = [sym.slice_axis(spec.inputs[0], name=f"{spec.name}_{i}" if tops > 1 else spec.name, axis=axis,
                              begin=bounds[i], end=bounds[i + 1]) for i in range(tops)]
    return Converted(outputs)


def convert_crop(spec: LayerSpec) -> Converted:
    param = spec.layer.crop_param
    if len(spec.inputs) != 2:
        raise spec.fail(f"Crop needs 2 bottoms (the data and the blob giving the size), got {len(spec.inputs)}")
    axis = axis_value(spec, param.axis)
    if axis not in (2, -2):
        raise spec.fail(f"axis={axis}: only cropping height and width of NCHW data (axis 2) is supported")
    offsets = bounded(spec, "offset", param.offset, 0, 1 << 31)
    if len(offsets) == 0:
        offset = (0, 0)
    elif len(offsets) == 1:
        offset = (offsets[0], offsets[0])
    elif len(offsets) == 2:
        offset = offsets
    else:
        raise spec.fail(f"offset={list(offsets)} must have 0, 1 or 2 values for axis 2 of 4-D data")
    out = _sym().Crop(*spec.inputs, name=spec.name, num_args=2, offset=offset, center_crop=False)
    return Converted([out])


def convert_split(spec: LayerSpec) -> Converted:
    return Converted([spec.inputs[0]] * len(spec.layer.top))
