"""MXNet's ``linalg`` operators beyond the matrix products: ``gemm``, ``potrf``, ``potri``,
``trmm``, ``trsm``, ``sumlogdiag``, ``syrk``, ``gelqf``, ``syevd``, ``inverse``, ``det``,
``slogdet``, ``extractdiag``/``makediag`` and ``extracttrian``/``maketrian``.

Every operator works on the trailing two axes (the leading axes are a batch) and has a
backward operator. The gradients follow MXNet's conventions (la_op.h): triangular inputs
(``trmm``, ``trsm``, ``potri``) read only their triangle and get gradient only there;
``potrf`` and ``syevd`` take a symmetric input and give a symmetric gradient.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define


def _t(x):
    return x.swapaxes(-1, -2)


def _matrix(name, shape, square=False, min_ndim=2):
    shape = tuple(shape)
    if len(shape) < min_ndim:
        raise ShapeError(f"linalg.{name}: the input must have at least {min_ndim} axes (a matrix, or a batch of "
                         f"them in the leading axes), got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ShapeError(f"linalg.{name}: the input must be square in its last two axes, got shape {shape}")
    return shape


def _triangle(xp, a, lower):
    return xp.tril(a) if lower else xp.triu(a)


def _inv(xp, a):
    return xp.linalg.inv(a)


def _backward_op(name, params, num_inputs, input_names, out_shapes, kernel, out_dtypes=None):
    define(OpDef(
        name=f"_backward_linalg_{name}", infer_shape=out_shapes, kernel=kernel, params=params,
        num_inputs=num_inputs, input_names=input_names,
        infer_dtype=out_dtypes or (lambda p, d: [d[-1]]),
        doc=f"Backward of linalg.{name}.",
    ))


# ---- gemm -----------------------------------------------------------------------------------

_GEMM = schema([Param("transpose_a", "bool", False), Param("transpose_b", "bool", False),
                Param("alpha", "float", 1.0), Param("beta", "float", 1.0), Param("axis", "int", -2)])


def _rows_last_order(ndim, axis):
    axis = axis % ndim
    return [i for i in range(ndim - 1) if i != axis] + [axis, ndim - 1]


def move_rows_last(x, axis):
    """The matrices whose rows lie in ``axis`` (MXNet's ``axis``; the columns are the last axis)
    moved to the last two axes."""
    return x.transpose(_rows_last_order(x.ndim, axis))


def move_rows_back(x, axis):
    """The inverse of :func:`move_rows_last`."""
    order = _rows_last_order(x.ndim, axis)
    return x.transpose([order.index(i) for i in range(x.ndim)])


def _gemm_operands(a, b, params):
    a, b = move_rows_last(a, params["axis"]), move_rows_last(b, params["axis"])
    return (_t(a) if params["transpose_a"] else a), (_t(b) if params["transpose_b"] else b)


def _shape_moved(shape, axis):
    import numpy as np

    return move_rows_last(np.empty(tuple(shape), dtype=np.bool_), axis).shape


def _gemm_shape(params, in_shapes):
    a, b, c = (tuple(s) for s in in_shapes)
    for s in (a, b, c):
        _matrix("gemm", s)
    if not len(a) == len(b) == len(c):
        raise ShapeError(f"linalg.gemm: A, B and C must have one number of axes, got {a}, {b}, {c}")
    if not -len(a) <= params["axis"] < len(a) - 1 or params["axis"] == -1:
        raise ShapeError(f"linalg.gemm: axis={params['axis']} must name the row axis (not the last, the columns)")
    ma, mb = _shape_moved(a, params["axis"]), _shape_moved(b, params["axis"])
    rows, inner_a = (ma[-1], ma[-2]) if params["transpose_a"] else (ma[-2], ma[-1])
    inner_b, cols = (mb[-1], mb[-2]) if params["transpose_b"] else (mb[-2], mb[-1])
    if inner_a != inner_b or ma[:-2] != mb[:-2] or _shape_moved(c, params["axis"]) != (*ma[:-2], rows, cols):
        raise ShapeError(f"linalg.gemm: shapes A {a}, B {b}, C {c} do not chain (transpose_a="
                         f"{params['transpose_a']}, transpose_b={params['transpose_b']}, axis={params['axis']})")
    return [c]


def _gemm_kernel(xp, inputs, outputs, params):
    a, b = _gemm_operands(inputs[0], inputs[1], params)
    c = move_rows_last(inputs[2], params["axis"])
    result = params["alpha"] * xp.matmul(a, b) + params["beta"] * c
    write(xp, outputs[0], move_rows_back(result, params["axis"]))


def _gemm_backward_kernel(xp, inputs, outputs, params):
    g, a, b = (move_rows_last(x, params["axis"]) for x in inputs[:3])
    op_a = _t(a) if params["transpose_a"] else a
    op_b = _t(b) if params["transpose_b"] else b
    grad_op_a = params["alpha"] * xp.matmul(g, _t(op_b))
    grad_op_b = params["alpha"] * xp.matmul(_t(op_a), g)
    write(xp, outputs[0], move_rows_back(_t(grad_op_a) if params["transpose_a"] else grad_op_a, params["axis"]))
    write(xp, outputs[1], move_rows_back(_t(grad_op_b) if params["transpose_b"] else grad_op_b, params["axis"]))
    write(xp, outputs[2], move_rows_back(params["beta"] * g, params["axis"]))


define(OpDef(
    name="_linalg_gemm", aliases=("linalg_gemm",), infer_shape=_gemm_shape, kernel=_gemm_kernel, params=_GEMM,
    num_inputs=3, input_names=("A", "B", "C"),
    gradient=lambda F, p, i, o, g: as_list(F("_backward_linalg_gemm", g[0], i[0], i[1], **p)),
    doc="alpha * op(A) @ op(B) + beta * C over the matrices with rows in axis and columns in the last axis.",
))
define(OpDef(
    name="_backward_linalg_gemm", infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2]), tuple(s[0])],
    kernel=_gemm_backward_kernel, params=_GEMM, num_inputs=3, input_names=("out_grad", "A", "B"),
    num_outputs=3, output_names=("A_grad", "B_grad", "C_grad"), infer_dtype=lambda p, d: [d[1], d[2], d[0]],
    doc="Backward of linalg.gemm.",
))


# ---- potrf / potri ------------------------------------------------------------------------

_LOWER = schema([Param("lower", "bool", True, doc="Lower (True) or upper (False) triangular factor.")])


def _square_shape(name):
    return lambda p, s: [_matrix(name, s[0], square=True)]


def _potrf_kernel(xp, inputs, outputs, params):
    a = inputs[0]
    factor = xp.linalg.cholesky(xp.tril(a) + _t(xp.tril(a, -1)))  # reads the lower triangle, as LAPACK's
    write(xp, outputs[0], factor if params["lower"] else _t(factor))


def _phi(xp, x):
    """The lower triangle of x with its diagonal halved."""
    return xp.tril(x) - 0.5 * x * xp.eye(x.shape[-1], dtype=x.dtype)


def _sym(x):
    return 0.5 * (x + _t(x))


def _potrf_backward_kernel(xp, inputs, outputs, params):
    g, factor = inputs
    low, g_low = (factor, g) if params["lower"] else (_t(factor), _t(g))
    inv = _inv(xp, low)
    # A = L L^T: dA = sym(L^-T Phi(L^T dL) L^-1) (Murray 2016), symmetric like A
    write(xp, outputs[0], _sym(_t(inv) @ _phi(xp, _t(low) @ g_low) @ inv))


define(OpDef(
    name="_linalg_potrf", aliases=("linalg_potrf",), infer_shape=_square_shape("potrf"), kernel=_potrf_kernel,
    params=_LOWER, gradient=lambda F, p, i, o, g: [F("_backward_linalg_potrf", g[0], o[0], **p)],
    backward_ignores=frozenset({0}),
    doc="Cholesky factor L of a symmetric positive-definite A = L L^T (U with A = U^T U when lower=False).",
))
_backward_op("potrf", _LOWER, 2, ("out_grad", "factor"), lambda p, s: [tuple(s[1])], _potrf_backward_kernel)


def _potri_kernel(xp, inputs, outputs, params):
    factor = _triangle(xp, inputs[0], params["lower"])
    inv = _inv(xp, factor)
    # lower: A = L L^T, A^-1 = L^-T L^-1; upper: A = U^T U, A^-1 = U^-1 U^-T
    write(xp, outputs[0], _t(inv) @ inv if params["lower"] else inv @ _t(inv))


def _potri_backward_kernel(xp, inputs, outputs, params):
    g, factor, out = inputs
    factor = _triangle(xp, factor, params["lower"])
    grad_a = -(out @ g @ out)  # d(A^-1): out symmetric
    sym_grad = grad_a + _t(grad_a)
    grad = sym_grad @ factor if params["lower"] else factor @ sym_grad
    write(xp, outputs[0], _triangle(xp, grad, params["lower"]))


define(OpDef(
    name="_linalg_potri", aliases=("linalg_potri",), infer_shape=_square_shape("potri"), kernel=_potri_kernel,
    params=_LOWER, gradient=lambda F, p, i, o, g: [F("_backward_linalg_potri", g[0], i[0], o[0], **p)],
    doc="The inverse of A = L L^T from its Cholesky factor L (of A = U^T U from U when lower=False).",
))
_backward_op("potri", _LOWER, 3, ("out_grad", "factor", "output"), lambda p, s: [tuple(s[1])],
             _potri_backward_kernel)


# ---- trmm / trsm ----------------------------------------------------------------------------

_TRIANGULAR = schema([Param("transpose", "bool", False), Param("rightside", "bool", False),
                      Param("lower", "bool", True), Param("alpha", "float", 1.0)])


def _tri_shape(name):
    def infer(params, in_shapes):
        a = _matrix(name, in_shapes[0], square=True)
        b = _matrix(name, in_shapes[1])
        side = b[-1] if params["rightside"] else b[-2]
        if a[:-2] != b[:-2] or side != a[-1]:
            raise ShapeError(f"linalg.{name}: triangular A {a} does not fit B {b} (rightside={params['rightside']})")
        return [b]

    return infer


def _op_tri(xp, a, params):
    tri = _triangle(xp, a, params["lower"])
    return _t(tri) if params["transpose"] else tri


def _from_op_grad(xp, grad_op, params):
    """The gradient of A from that of op(A), kept to A's triangle."""
    return _triangle(xp, _t(grad_op) if params["transpose"] else grad_op, params["lower"])


def _trmm_kernel(xp, inputs, outputs, params):
    op_a, b = _op_tri(xp, inputs[0], params), inputs[1]
    write(xp, outputs[0], params["alpha"] * (b @ op_a if params["rightside"] else op_a @ b))


def _trmm_backward_kernel(xp, inputs, outputs, params):
    g, a, b = inputs
    op_a, alpha = _op_tri(xp, a, params), params["alpha"]
    if params["rightside"]:
        grad_op, grad_b = alpha * (_t(b) @ g), alpha * (g @ _t(op_a))
    else:
        grad_op, grad_b = alpha * (g @ _t(b)), alpha * (_t(op_a) @ g)
    write(xp, outputs[0], _from_op_grad(xp, grad_op, params))
    write(xp, outputs[1], grad_b)


def _trsm_kernel(xp, inputs, outputs, params):
    inv = _inv(xp, _op_tri(xp, inputs[0], params))
    b = inputs[1]
    write(xp, outputs[0], params["alpha"] * (b @ inv if params["rightside"] else inv @ b))


def _trsm_backward_kernel(xp, inputs, outputs, params):
    g, a, out = inputs
    inv = _inv(xp, _op_tri(xp, a, params))
    if params["rightside"]:  # X = alpha B op(A)^-1
        y = g @ _t(inv)
        grad_op, grad_b = -(_t(out) @ y), params["alpha"] * y
    else:  # X = alpha op(A)^-1 B
        y = _t(inv) @ g
        grad_op, grad_b = -(y @ _t(out)), params["alpha"] * y
    write(xp, outputs[0], _from_op_grad(xp, grad_op, params))
    write(xp, outputs[1], grad_b)


_PAIR_OUT = dict(num_outputs=2, output_names=("A_grad", "B_grad"))
for _name, _kernel, _backward, _inputs, _doc in (
        ("trmm", _trmm_kernel, _trmm_backward_kernel, lambda i, o: (i[0], i[1]),
         "alpha * op(A) @ B (or alpha * B @ op(A) with rightside) for a triangular A."),
        ("trsm", _trsm_kernel, _trsm_backward_kernel, lambda i, o: (i[0], o[0]),
         "The solution X of op(A) X = alpha B (or X op(A) = alpha B with rightside) for a triangular A.")):
    define(OpDef(
        name=f"_linalg_{_name}", aliases=(f"linalg_{_name}",), infer_shape=_tri_shape(_name), kernel=_kernel,
        params=_TRIANGULAR, num_inputs=2, input_names=("A", "B"), doc=_doc,
        gradient=(lambda n, sel: lambda F, p, i, o, g: as_list(F(f"_backward_linalg_{n}", g[0], *sel(i, o), **p)))(
            _name, _inputs),
    ))
    define(OpDef(
        name=f"_backward_linalg_{_name}", infer_shape=lambda p, s: [tuple(s[1]), tuple(s[0])], kernel=_backward,
        params=_TRIANGULAR, num_inputs=3, input_names=("out_grad", "A", "B_or_output"),
        infer_dtype=lambda p, d: [d[1], d[0]], doc=f"Backward of linalg.{_name}.", **_PAIR_OUT,
    ))


# ---- sumlogdiag, syrk -----------------------------------------------------------------------

def _diag_of(xp, a):
    return xp.diagonal(a, 0, -2, -1)


define(OpDef(
    name="_linalg_sumlogdiag", aliases=("linalg_sumlogdiag",),
    infer_shape=lambda p, s: [_matrix("sumlogdiag", s[0], square=True)[:-2] or (1,)],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.log(_diag_of(xp, i[0])).sum(axis=-1).reshape(o[0].shape)),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_sumlogdiag", g[0], i[0])],
    doc="The sum of the logarithms of the diagonal of each matrix.",
))


def _sumlogdiag_backward(xp, inputs, outputs, params):
    g, a = inputs
    n = a.shape[-1]
    scale = (g.reshape((*a.shape[:-2], 1)) / _diag_of(xp, a))[..., None]
    write(xp, outputs[0], scale * xp.eye(n, dtype=a.dtype))


_backward_op("sumlogdiag", schema(), 2, ("out_grad", "A"), lambda p, s: [tuple(s[1])], _sumlogdiag_backward)

_SYRK = schema([Param("transpose", "bool", False), Param("alpha", "float", 1.0)])


def _syrk_shape(params, in_shapes):
    a = _matrix("syrk", in_shapes[0])
    side = a[-1] if params["transpose"] else a[-2]
    return [(*a[:-2], side, side)]


def _syrk_kernel(xp, inputs, outputs, params):
    a = inputs[0]
    write(xp, outputs[0], params["alpha"] * (_t(a) @ a if params["transpose"] else a @ _t(a)))


def _syrk_backward(xp, inputs, outputs, params):
    g, a = inputs
    both = g + _t(g)
    write(xp, outputs[0], params["alpha"] * (a @ both if params["transpose"] else both @ a))


define(OpDef(
    name="_linalg_syrk", aliases=("linalg_syrk",), infer_shape=_syrk_shape, kernel=_syrk_kernel, params=_SYRK,
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_syrk", g[0], i[0], **p)],
    doc="alpha * A A^T (alpha * A^T A with transpose).",
))
_backward_op("syrk", _SYRK, 2, ("out_grad", "A"), lambda p, s: [tuple(s[1])], _syrk_backward)


# ---- gelqf ----------------------------------------------------------------------------------

def _gelqf_shape(params, in_shapes):
    a = _matrix("gelqf", in_shapes[0])
    if a[-2] > a[-1]:
        raise ShapeError(f"linalg.gelqf: A must have no more rows than columns, got shape {a}")
    return [a, (*a[:-2], a[-2], a[-2])]


def _gelqf_kernel(xp, inputs, outputs, params):
    q, r = xp.linalg.qr(_t(inputs[0]))  # A^T = Q' R, so A = R^T Q'^T = L Q
    write(xp, outputs[0], _t(q))
    write(xp, outputs[1], _t(r))


def _copy_lower_to_upper(xp, m):
    return xp.tril(m) + _t(xp.tril(m, -1))


def _gelqf_backward(xp, inputs, outputs, params):
    g_q, g_l, q, low = inputs
    # la_op.h: M = L^T dL - dQ Q^T; dA = L^-T (dQ + copyLTU(M) Q)
    m = _t(low) @ g_l - g_q @ _t(q)
    write(xp, outputs[0], _t(_inv(xp, low)) @ (g_q + _copy_lower_to_upper(xp, m) @ q))


define(OpDef(
    name="_linalg_gelqf", aliases=("linalg_gelqf",), infer_shape=_gelqf_shape, kernel=_gelqf_kernel,
    num_outputs=2, output_names=("Q", "L"), infer_dtype=lambda p, d: [d[0], d[0]], backward_ignores=frozenset({0}),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_gelqf", g[0], g[1], o[0], o[1])],
    doc="LQ factorization A = L Q of a wide matrix: Q with orthonormal rows, L lower triangular.",
))
_backward_op("gelqf", schema(), 4, ("Q_grad", "L_grad", "Q", "L"), lambda p, s: [tuple(s[2])], _gelqf_backward)


# ---- syevd ----------------------------------------------------------------------------------

def _syevd_kernel(xp, inputs, outputs, params):
    a = inputs[0]
    values, vectors = xp.linalg.eigh(xp.tril(a) + _t(xp.tril(a, -1)))
    u = _t(vectors)  # rows are the eigenvectors
    # MXNet's sign: the entry of largest magnitude of each eigenvector is positive
    largest = xp.take_along_axis(u, xp.abs(u).argmax(axis=-1)[..., None], axis=-1)
    write(xp, outputs[0], xp.where(largest < 0, -u, u))
    write(xp, outputs[1], values)


def _syevd_backward(xp, inputs, outputs, params):
    g_u, g_l, u, lam = inputs
    n = lam.shape[-1]
    temp = g_u @ _t(u)
    gap = lam[..., :, None] - lam[..., None, :]
    off = ~xp.eye(n, dtype=bool)
    safe = xp.where(off, gap, 1.0)
    middle = xp.where(off, (temp - _t(temp)) / (2 * safe), 0.0)
    middle = middle + g_l[..., None] * xp.eye(n, dtype=u.dtype)
    write(xp, outputs[0], _t(u) @ middle @ u)


define(OpDef(
    name="_linalg_syevd", aliases=("linalg_syevd",),
    infer_shape=lambda p, s: (lambda a: [a, a[:-1]])(_matrix("syevd", s[0], square=True)),
    kernel=_syevd_kernel, num_outputs=2, output_names=("U", "L"), infer_dtype=lambda p, d: [d[0], d[0]],
    backward_ignores=frozenset({0}),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_syevd", g[0], g[1], o[0], o[1])],
    doc="Eigendecomposition A = U^T diag(L) U of a symmetric matrix (ascending L, rows of U the eigenvectors).",
))
_backward_op("syevd", schema(), 4, ("U_grad", "L_grad", "U", "L"), lambda p, s: [tuple(s[2])], _syevd_backward)


# ---- inverse, det, slogdet ------------------------------------------------------------------

define(OpDef(
    name="_linalg_inverse", aliases=("linalg_inverse",), infer_shape=_square_shape("inverse"),
    kernel=lambda xp, i, o, p: write(xp, o[0], _inv(xp, i[0])), backward_ignores=frozenset({0}),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_inverse", g[0], o[0])],
    doc="The inverse of each square matrix.",
))
_backward_op("inverse", schema(), 2, ("out_grad", "output"), lambda p, s: [tuple(s[1])],
             lambda xp, i, o, p: write(xp, o[0], -(_t(i[1]) @ i[0] @ _t(i[1]))))


def _scalar_per_matrix(name):
    return lambda p, s: [_matrix(name, s[0], square=True)[:-2] or (1,)]


define(OpDef(
    name="_linalg_det", aliases=("linalg_det",), infer_shape=_scalar_per_matrix("det"),
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.linalg.det(i[0]).reshape(o[0].shape)),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_det", g[0], i[0], o[0])],
    doc="The determinant of each square matrix.",
))


def _det_backward(xp, inputs, outputs, params):
    g, a, det = inputs
    scale = (g * det).reshape((*a.shape[:-2], 1, 1))
    write(xp, outputs[0], scale * _t(_inv(xp, a)))


_backward_op("det", schema(), 3, ("out_grad", "A", "det"), lambda p, s: [tuple(s[1])], _det_backward)


def _slogdet_kernel(xp, inputs, outputs, params):
    sign, logabs = xp.linalg.slogdet(inputs[0])
    write(xp, outputs[0], sign.reshape(outputs[0].shape))
    write(xp, outputs[1], logabs.reshape(outputs[1].shape))


def _slogdet_backward(xp, inputs, outputs, params):
    g, a = inputs
    write(xp, outputs[0], g.reshape((*a.shape[:-2], 1, 1)) * _t(_inv(xp, a)))


define(OpDef(
    name="_linalg_slogdet", aliases=("linalg_slogdet",),
    infer_shape=lambda p, s: _scalar_per_matrix("slogdet")(p, s) * 2, kernel=_slogdet_kernel, num_outputs=2,
    output_names=("sign", "logabsdet"), infer_dtype=lambda p, d: [d[0], d[0]],
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_slogdet", g[1], i[0])],
    doc="The sign and the log of the absolute value of the determinant of each square matrix.",
))
_backward_op("slogdet", schema(), 2, ("logabsdet_grad", "A"), lambda p, s: [tuple(s[1])], _slogdet_backward)


# ---- extractdiag / makediag / extracttrian / maketrian -------------------------------------

_OFFSET = schema([Param("offset", "int", 0)])
_TRIAN = schema([Param("offset", "int", 0), Param("lower", "bool", True)])


def _extractdiag_shape(params, in_shapes):
    a, k = _matrix("extractdiag", in_shapes[0]), params["offset"]
    length = min(a[-2] + min(k, 0), a[-1] - max(k, 0))
    if length <= 0:
        raise ShapeError(f"linalg.extractdiag: offset={k} is outside the matrices of shape {a}")
    return [(*a[:-2], length)]


def _makediag(xp, v, k, out):
    out[...] = 0
    n = v.shape[-1]
    rows, cols = xp.arange(n) + max(-k, 0), xp.arange(n) + max(k, 0)
    out[..., rows, cols] = v


define(OpDef(
    name="_linalg_extractdiag", aliases=("linalg_extractdiag",), infer_shape=_extractdiag_shape, params=_OFFSET,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.diagonal(i[0], p["offset"], -2, -1)),
    gradient=lambda F, p, i, o, g: [F("_backward_linalg_extractdiag", g[0], i[0], **p)],
    backward_ignores=frozenset({0}), doc="The offset-th diagonal of each matrix.",
))
_backward_op("extractdiag", _OFFSET, 2, ("out_grad", "A"), lambda p, s: [tuple(s[1])],
             lambda xp, i, o, p: _makediag(xp, i[0], p["offset"], o[0]))


def _makediag_shape(params, in_shapes):
    v = tuple(in_shapes[0])
    if not v:
        raise ShapeError("linalg.makediag: the input must have at least one axis")
    n = v[-1] + abs(params["offset"])
    return [(*v[:-1], n, n)]


define(OpDef(
    name="_linalg_makediag", aliases=("linalg_makediag",), infer_shape=_makediag_shape, params=_OFFSET,
    kernel=lambda xp, i, o, p: _makediag(xp, i[0], p["offset"], o[0]),
    gradient=lambda F, p, i, o, g: [F("_linalg_extractdiag", g[0], **p)], backward_ignores=frozenset({0}),
    doc="Square matrices with the input on their offset-th diagonal.",
))


def _trian_indices(xp, n, params):
    """Indices of the triangle in MXNet 1.9.1's packed order: the lower triangle (offset < 0, or 0 and
    lower) on and below diagonal offset row by row; the upper one (on and above it) column by column,
    which is the row-major lower triangle of the transpose."""
    k = params["offset"]
    if k < 0 or (k == 0 and params["lower"]):
        return xp.tril_indices(n, k)
    cols, rows = xp.tril_indices(n, -k)
    return rows, cols


def _trian_count(n, params):
    import numpy as np

    return len(_trian_indices(np, n, params)[0])


def _extracttrian_shape(params, in_shapes):
    a = _matrix("extracttrian", in_shapes[0], square=True)
    if abs(params["offset"]) >= a[-1]:
        raise ShapeError(f"linalg.extracttrian: offset={params['offset']} leaves nothing of {a[-1]}x{a[-1]} matrices")
    return [(*a[:-2], _trian_count(a[-1], params))]


def _maketrian_side(params, count):
    import math

    side = (math.isqrt(8 * count + 1) - 1) // 2  # m (m + 1) / 2 = count, the triangle of an m x m block
    if side * (side + 1) // 2 != count:
        raise ShapeError(f"linalg.maketrian: {count} values do not fill a triangle")
    return side + abs(params["offset"])


def _maketrian_shape(params, in_shapes):
    v = tuple(in_shapes[0])
    if not v:
        raise ShapeError("linalg.maketrian: the input must have at least one axis")
    n = _maketrian_side(params, v[-1])
    return [(*v[:-1], n, n)]


def _fill_trian(xp, v, params, out):
    out[...] = 0
    rows, cols = _trian_indices(xp, out.shape[-1], params)
    out[..., rows, cols] = v


def _take_trian(xp, a, params, out):
    rows, cols = _trian_indices(xp, a.shape[-1], params)
    write(xp, out, a[..., rows, cols])


define(OpDef(
    name="_linalg_extracttrian", aliases=("linalg_extracttrian",), infer_shape=_extracttrian_shape, params=_TRIAN,
    kernel=lambda xp, i, o, p: _take_trian(xp, i[0], p, o[0]), backward_ignores=frozenset({0}),
    gradient=lambda F, p, i, o, g: [F("_linalg_maketrian", g[0], **p)],
    doc="The triangle of each matrix (see maketrian for which and in which order) as a vector.",
))
define(OpDef(
    name="_linalg_maketrian", aliases=("linalg_maketrian",), infer_shape=_maketrian_shape, params=_TRIAN,
    kernel=lambda xp, i, o, p: _fill_trian(xp, i[0], p, o[0]), backward_ignores=frozenset({0}),
    gradient=lambda F, p, i, o, g: [F("_linalg_extracttrian", g[0], **p)],
    doc="Square matrices whose triangle (lower for offset < 0 or offset 0 and lower, else upper, starting "
        "at diagonal offset) holds the input vectors, the lower one row by row and the upper one column by "
        "column, as MXNet packs them; zeros elsewhere.",
))
