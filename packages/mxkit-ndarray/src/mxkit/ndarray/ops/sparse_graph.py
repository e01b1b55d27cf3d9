"""The graph forms of MXNet's storage operators, ``cast_storage`` and ``_sparse_retain``.

Symbolic graphs compute on dense values, so in a graph ``cast_storage`` passes its input
through (the storage it names is what an imperative call gives: mxkit.ndarray.sparse_ops)
and ``_sparse_retain`` keeps the rows named by ``indices`` and zeros the others -- the
dense values of MXNet's row_sparse result. Their gradients follow the same rule.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import first_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_STYPE_SCHEMA = schema([Param("stype", "str", doc="'default', 'row_sparse' or 'csr'.")])


def _check_stype(params, in_shapes):
    if params["stype"] not in ("default", "row_sparse", "csr"):
        raise ShapeError(f"cast_storage: unknown storage type {params['stype']!r}; MXNet's are 'default', "
                         f"'row_sparse' and 'csr'")
    if params["stype"] == "csr" and len(in_shapes[0]) != 2:
        raise ShapeError(f"cast_storage to csr needs a 2-D array, got shape {tuple(in_shapes[0])}")
    return [tuple(in_shapes[0])]


define(OpDef(
    name="cast_storage", infer_shape=_check_stype, params=_STYPE_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0]),
    gradient=lambda F, p, i, o, g: [g[0]],
    doc="The input in storage type stype (in a graph: its dense values).",
))


def _retain_shape(params, in_shapes):
    if len(in_shapes[0]) < 1:
        raise ShapeError("_sparse_retain needs an array with rows, got a 0-d array")
    return [tuple(in_shapes[0])]


def _kept_rows(xp, data, indices):
    rows = indices.astype("int64").ravel()
    rows = rows[(rows >= 0) & (rows < data.shape[0])]
    mask = xp.zeros((data.shape[0],) + (1,) * (data.ndim - 1), dtype=data.dtype)
    mask[rows] = 1
    return mask


def _retain_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    write(xp, outputs[0], data * _kept_rows(xp, data, indices))


def _retain_backward_kernel(xp, inputs, outputs, params):
    out_grad, indices = inputs
    write(xp, outputs[0], out_grad * _kept_rows(xp, out_grad, indices))


define(OpDef(
    name="_sparse_retain", infer_shape=_retain_shape, kernel=_retain_kernel, num_inputs=2,
    input_names=("data", "indices"), infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: [F("_backward_sparse_retain", g[0], i[1]), None],
    backward_ignores=frozenset({0}), doc="The rows of data named by indices; the other rows are zero.",
))
define(OpDef(
    name="_backward_sparse_retain", infer_shape=first_shape, kernel=_retain_backward_kernel, num_inputs=2,
    input_names=("out_grad", "indices"), infer_dtype=lambda p, d: [d[0]],
    doc="Backward of _sparse_retain: the gradient of the kept rows.",
))
