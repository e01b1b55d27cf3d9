"""Matrix products: ``dot``, ``batch_dot`` and ``linalg_gemm2``."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_DOT_SCHEMA = schema([Param("transpose_a", "bool", False), Param("transpose_b", "bool", False),
                      Param("forward_stype", "str", None, optional=True,
                            doc="Storage of the imperative result (mx.nd.dot); a graph computes dense values.")])


def _dot_shape(params, in_shapes):
    a, b = tuple(in_shapes[0]), tuple(in_shapes[1])
    if not a or not b:
        raise ShapeError(f"dot: inputs must have at least one dimension, got {a} and {b}")
    ka = a[0] if params["transpose_a"] else a[-1]
    kb = b[-1] if params["transpose_b"] else b[0]
    if ka != kb and ka and kb:  # 0 is an unknown dimension (partial inference)
        raise ShapeError(f"dot: the contracted dimensions differ: {ka} of lhs {a} vs {kb} of rhs {b} "
                         f"(transpose_a={params['transpose_a']}, transpose_b={params['transpose_b']})")
    left = a[1:] if params["transpose_a"] else a[:-1]
    right = b[:-1] if params["transpose_b"] else b[1:]
    return [left + right or (1,)]


def _as_matrices(a, b, params):
    """(M, K) and (K, N) views of MXNet's N-d dot operands (transposes applied)."""
    lhs = a.reshape(a.shape[0], -1).T if params["transpose_a"] else a.reshape(-1, a.shape[-1])
    rhs = b.reshape(-1, b.shape[-1]).T if params["transpose_b"] else b.reshape(b.shape[0], -1)
    return lhs, rhs


def _dot_kernel(xp, inputs, outputs, params):
    a, b = inputs
    out = outputs[0]
    if a.ndim == 2 and b.ndim == 2 and not params["transpose_a"] and not params["transpose_b"] \
            and a.dtype == b.dtype == out.dtype:
        xp.matmul(a, b, out=out)  # the common case, straight into the output
        return
    lhs, rhs = _as_matrices(a, b, params)
    write(xp, out, (lhs @ rhs).reshape(out.shape))


def _dot_backward_kernel(xp, inputs, outputs, params):
    out_grad, a, b = inputs
    lhs, rhs = _as_matrices(a, b, params)
    grad = out_grad.reshape(lhs.shape[0], rhs.shape[1])
    grad_lhs = grad @ rhs.T
    grad_rhs = lhs.T @ grad
    write(xp, outputs[0], (grad_lhs.T if params["transpose_a"] else grad_lhs).reshape(a.shape))
    write(xp, outputs[1], (grad_rhs.T if params["transpose_b"] else grad_rhs).reshape(b.shape))


def _pair_backward_shape(params, in_shapes):
    return [tuple(in_shapes[1]), tuple(in_shapes[2])]


def _pair_gradient(backward):
    def gradient(F, params, inputs, outputs, out_grads):
        return list(F(backward, out_grads[0], inputs[0], inputs[1], **params))

    return gradient


define(OpDef(
    name="dot", infer_shape=_dot_shape, kernel=_dot_kernel, params=_DOT_SCHEMA, num_inputs=2,
    input_names=("lhs", "rhs"), gradient=_pair_gradient("_backward_dot"),
    doc="Dot product: the last axis of lhs with the first of rhs (after the optional transposes).",
))
define(OpDef(
    name="_backward_dot", infer_shape=_pair_backward_shape, kernel=_dot_backward_kernel, params=_DOT_SCHEMA,
    num_inputs=3, num_outputs=2, input_names=("out_grad", "lhs", "rhs"), output_names=("lhs_grad", "rhs_grad"),
    infer_dtype=lambda p, d: [d[1], d[2]], doc="Backward of dot.",
))


# ---- batched ----------------------------------------------------------------------------

def _batch_operands(a, b, params, xp=None):
    lhs = a.swapaxes(-1, -2) if params["transpose_a"] else a
    rhs = b.swapaxes(-1, -2) if params["transpose_b"] else b
    return lhs, rhs


def _batch_shape(name, min_ndim):
    def infer(params, in_shapes):
        a, b = tuple(in_shapes[0]), tuple(in_shapes[1])
        if len(a) < min_ndim or len(a) != len(b):
            raise ShapeError(f"{name}: inputs must both have {min_ndim}{'+' if min_ndim == 2 else ''} dimensions "
                             f"and the same number, got {a} and {b}")
        if name == "batch_dot" and len(a) != 3:
            raise ShapeError(f"batch_dot: inputs must be 3-D (batch, rows, cols), got {a} and {b}")
        if a[:-2] != b[:-2]:
            raise ShapeError(f"{name}: batch dimensions differ: {a[:-2]} vs {b[:-2]}")
        m, ka = (a[-1], a[-2]) if params["transpose_a"] else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if params["transpose_b"] else (b[-2], b[-1])
        if ka != kb and ka and kb:
            raise ShapeError(f"{name}: the contracted dimensions differ: {ka} of {a} vs {kb} of {b} "
                             f"(transpose_a={params['transpose_a']}, transpose_b={params['transpose_b']})")
        return [(*a[:-2], m, n)]

    return infer


def _batch_kernel(xp, inputs, outputs, params):
    lhs, rhs = _batch_operands(*inputs, params)
    result = xp.matmul(lhs, rhs)
    alpha = params.get("alpha", 1.0)
    write(xp, outputs[0], result if alpha == 1.0 else alpha * result)


def _batch_backward_kernel(xp, inputs, outputs, params):
    out_grad, a, b = inputs
    lhs, rhs = _batch_operands(a, b, params)
    grad = out_grad * params.get("alpha", 1.0)
    grad_lhs = xp.matmul(grad, rhs.swapaxes(-1, -2))
    grad_rhs = xp.matmul(lhs.swapaxes(-1, -2), grad)
    write(xp, outputs[0], grad_lhs.swapaxes(-1, -2) if params["transpose_a"] else grad_lhs)
    write(xp, outputs[1], grad_rhs.swapaxes(-1, -2) if params["transpose_b"] else grad_rhs)


define(OpDef(
    name="batch_dot", infer_shape=_batch_shape("batch_dot", 3), kernel=_batch_kernel, params=_DOT_SCHEMA,
    num_inputs=2, input_names=("lhs", "rhs"), gradient=_pair_gradient("_backward_batch_dot"),
    doc="Matrix product of each pair in two batches of matrices (batch, rows, cols).",
))
define(OpDef(
    name="_backward_batch_dot", infer_shape=_pair_backward_shape, kernel=_batch_backward_kernel,
    params=_DOT_SCHEMA, num_inputs=3, num_outputs=2, input_names=("out_grad", "lhs", "rhs"),
    output_names=("lhs_grad", "rhs_grad"), infer_dtype=lambda p, d: [d[1], d[2]], doc="Backward of batch_dot.",
))

_GEMM2_SCHEMA = schema([Param("transpose_a", "bool", False), Param("transpose_b", "bool", False),
                        Param("alpha", "float", 1.0), Param("axis", "int", -2)])


def _gemm2_shape(params, in_shapes):
    import numpy as np
    from mxkit.ndarray.ops.linalg_extra import move_rows_back, move_rows_last

    a, b = (tuple(s) for s in in_shapes)
    axis = params["axis"]
    if len(a) < 2 or not -len(a) <= axis < len(a) - 1 or axis == -1:
        raise ShapeError(f"linalg_gemm2: axis={axis} must name the row axis of A {a} (the columns are the last)")
    moved = [move_rows_last(np.empty(s, dtype=np.bool_), axis).shape if len(s) == len(a) else s for s in (a, b)]
    out = _batch_shape("linalg_gemm2", 2)(params, moved)[0]
    return [move_rows_back(np.empty(out, dtype=np.bool_), axis).shape]


def _gemm2_kernel(xp, inputs, outputs, params):
    from mxkit.ndarray.ops.linalg_extra import move_rows_back, move_rows_last

    axis = params["axis"]
    moved = [move_rows_last(x, axis) for x in inputs]
    lhs, rhs = _batch_operands(*moved, params)
    write(xp, outputs[0], move_rows_back(params["alpha"] * xp.matmul(lhs, rhs), axis))


def _gemm2_backward_kernel(xp, inputs, outputs, params):
    from mxkit.ndarray.ops.linalg_extra import move_rows_last

    axis = params["axis"]
    moved_outputs = [move_rows_last(o, axis) for o in outputs]  # views: the kernel writes through them
    _batch_backward_kernel(xp, [move_rows_last(x, axis) for x in inputs], moved_outputs, params)


define(OpDef(
    name="_linalg_gemm2", aliases=("linalg_gemm2",), infer_shape=_gemm2_shape, kernel=_gemm2_kernel,
    params=_GEMM2_SCHEMA, num_inputs=2, input_names=("A", "B"),
    gradient=_pair_gradient("_backward_linalg_gemm2"),
    doc="alpha * op(A) @ op(B) over the trailing two axes (leading axes are a batch).",
))
define(OpDef(
    name="_backward_linalg_gemm2", infer_shape=_pair_backward_shape, kernel=_gemm2_backward_kernel,
    params=_GEMM2_SCHEMA, num_inputs=3, num_outputs=2, input_names=("out_grad", "A", "B"),
    output_names=("A_grad", "B_grad"), infer_dtype=lambda p, d: [d[1], d[2]], doc="Backward of linalg_gemm2.",
))

