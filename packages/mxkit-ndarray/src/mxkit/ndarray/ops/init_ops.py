"""Operators without array inputs that fill a new array: ``_zeros``, ``_ones``, ``_full``, ``_arange``, ``_eye``."""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_SHAPE_PARAMS = [Param("shape", "shape", (), doc="The shape of the output."),
                 Param("dtype", "dtype", "float32", doc="The dtype of the output.")]


def _fill(value_of):
    def kernel(xp, inputs, outputs, params):
        outputs[0][...] = value_of(params)

    return kernel


def _shape_of(params, in_shapes):
    if any(d < 0 for d in params["shape"]):
        raise ShapeError(f"shape {params['shape']} has a negative dimension; dimensions must be >= 0")
    return [params["shape"]]


_KW = dict(num_inputs=0, input_names=(), infer_dtype=lambda p, d: [p["dtype"]])
define(OpDef(name="_zeros", infer_shape=_shape_of, kernel=_fill(lambda p: 0), params=schema(_SHAPE_PARAMS),
             doc="An array of zeros.", **_KW))
define(OpDef(name="_ones", infer_shape=_shape_of, kernel=_fill(lambda p: 1), params=schema(_SHAPE_PARAMS),
             doc="An array of ones.", **_KW))
define(OpDef(name="_full", infer_shape=_shape_of, kernel=_fill(lambda p: p["value"]),
             params=schema([*_SHAPE_PARAMS, Param("value", "float", doc="The fill value.")]),
             doc="An array filled with a value.", **_KW))


def _arange_count(params):
    start, stop, step = params["start"], params["stop"], params["step"]
    if stop is None:
        start, stop = 0.0, start
    if step == 0:
        raise ShapeError("arange: step must not be 0")
    return max(math.ceil((stop - start) / step), 0), start


def _arange_shape(params, in_shapes):
    count, _ = _arange_count(params)
    return [(count * params["repeat"],)]


def _arange_kernel(xp, inputs, outputs, params):
    count, start = _arange_count(params)
    step = params["step"]
    if outputs[0].dtype.kind in "iu":  # start and step in the output dtype first, as MXNet (and numpy)
        start, step = int(start), int(step) or (1 if step > 0 else -1)
    values = start + xp.arange(count, dtype="float64") * step
    if params["repeat"] > 1:
        values = xp.repeat(values, params["repeat"])
    write(xp, outputs[0], values)


define(OpDef(
    name="_arange", infer_shape=_arange_shape, kernel=_arange_kernel,
    params=schema([Param("start", "float"), Param("stop", "float", None, optional=True),
                   Param("step", "float", 1.0), Param("repeat", "int", 1),
                   Param("dtype", "dtype", "float32")]),
    doc="Evenly spaced values in [start, stop), each repeated ``repeat`` times.", **_KW,
))


def _eye_kernel(xp, inputs, outputs, params):
    out = outputs[0]
    out[...] = 0
    n, m = out.shape
    k = params["k"]
    rows = xp.arange(max(0, -k), min(n, m - k))
    out[rows, rows + k] = 1


define(OpDef(
    name="_eye", infer_shape=lambda p, s: [(p["N"], p["M"] or p["N"])], kernel=_eye_kernel,
    params=schema([Param("N", "int"), Param("M", "int", 0), Param("k", "int", 0),
                   Param("dtype", "dtype", "float32")]),
    doc="A 2-D array with ones on the k-th diagonal.", **_KW,
))
