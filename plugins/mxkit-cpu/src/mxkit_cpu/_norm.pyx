# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False, language_level=3
"""BatchNorm over the channel axis of a (N, C, L) array, one channel at a time.

A channel's values (N runs of L) are read a few times in a row — statistics, then the
normalisation — so after the first read they come from cache: each kernel streams the data
from memory about once, where the numpy formulation makes a temporary per step. Sums run in
double. Every function handles channels ``[c0, c1)`` so that callers can split the channels
across threads.
"""

from libc.math cimport sqrt

ctypedef fused real:
    float
    double


cdef void _statistics(const real* x, Py_ssize_t n, Py_ssize_t channels, Py_ssize_t plane,
                      double* mean, double* var) noexcept nogil:
    """Mean and biased variance of one channel (two passes: the second over cached data)."""
    cdef Py_ssize_t m, k
    cdef const real* row
    cdef double total = 0, squares = 0, centred, count = n * plane
    for m in range(n):
        row = x + m * channels * plane
        for k in range(plane):
            total += row[k]
    mean[0] = total / count if count else 0
    for m in range(n):
        row = x + m * channels * plane
        for k in range(plane):
            centred = row[k] - mean[0]
            squares += centred * centred
    var[0] = squares / count if count else 0


def _check(Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t channels, tuple arrays):
    if not 0 <= c0 <= c1 <= channels:
        raise ValueError(f"channels [{c0}, {c1}) are outside the {channels} channels")
    for name, size in arrays:
        if size != channels:
            raise ValueError(f"{name} has {size} values, expected one per channel ({channels})")


def batchnorm_forward(const real[:, :, ::1] x, real[:, :, ::1] out, const real[::1] scale, const real[::1] shift,
                      double[::1] mean, double[::1] var, double[::1] inv_std, Py_ssize_t c0, Py_ssize_t c1,
                      bint batch_stats, double eps):
    """``out = (x - mean) * inv_std * scale + shift`` for channels ``[c0, c1)``.

    With ``batch_stats`` the channel's mean, biased variance and ``1 / sqrt(var + eps)`` are
    computed here and written to ``mean``, ``var`` and ``inv_std``; without, ``mean`` and
    ``inv_std`` must already hold the moving mean and its inverse standard deviation.
    """
    cdef Py_ssize_t n = x.shape[0], channels = x.shape[1], plane = x.shape[2]
    cdef Py_ssize_t c, m, k
    cdef const real* row
    cdef real* target
    cdef real centre, gain, bias
    _check(c0, c1, channels, (("scale", scale.shape[0]), ("shift", shift.shape[0]), ("mean", mean.shape[0]),
                              ("var", var.shape[0]), ("inv_std", inv_std.shape[0]), ("out", out.shape[1])))
    if out.shape[0] != n or out.shape[2] != plane:
        raise ValueError("out must have the shape of x")
    if n == 0 or plane == 0:
        return
    with nogil:
        for c in range(c0, c1):
            if batch_stats:
                _statistics(&x[0, c, 0], n, channels, plane, &mean[c], &var[c])
                inv_std[c] = 1 / sqrt(var[c] + eps)
            centre = <real>mean[c]
            gain = <real>(inv_std[c] * scale[c])
            bias = shift[c]
            for m in range(n):
                row = &x[m, c, 0]
                target = &out[m, c, 0]
                for k in range(plane):
                    target[k] = (row[k] - centre) * gain + bias


def batchnorm_backward(const real[:, :, ::1] out_grad, const real[:, :, ::1] x, real[:, :, ::1] data_grad,
                       const real[::1] scale, double[::1] mean, double[::1] inv_std, double[::1] scale_grad,
                       double[::1] shift_grad, Py_ssize_t c0, Py_ssize_t c1, bint batch_stats, double eps):
    """Gradients of :func:`batchnorm_forward` for channels ``[c0, c1)``: data (unless ``data_grad`` is
    None), and the sums ``scale_grad = sum(out_grad * normalised)``, ``shift_grad = sum(out_grad)``.

    With ``batch_stats`` the statistics are recomputed from ``x`` (and the data gradient takes
    their dependence on the data into account); otherwise ``mean`` and ``inv_std`` are given.
    """
    cdef Py_ssize_t n = x.shape[0], channels = x.shape[1], plane = x.shape[2]
    cdef Py_ssize_t c, m, k
    cdef double var, total, weighted, count = n * plane
    cdef const real* row
    cdef const real* grad_row
    cdef real* target
    cdef real centre, normaliser, gain, mean_grad, mean_weighted
    cdef bint want_data = data_grad is not None
    _check(c0, c1, channels, (("scale", scale.shape[0]), ("mean", mean.shape[0]), ("inv_std", inv_std.shape[0]),
                              ("scale_grad", scale_grad.shape[0]), ("shift_grad", shift_grad.shape[0]),
                              ("out_grad", out_grad.shape[1])))
    if out_grad.shape[0] != n or out_grad.shape[2] != plane or (
            want_data and (data_grad.shape[0] != n or data_grad.shape[1] != channels or data_grad.shape[2] != plane)):
        raise ValueError("out_grad and data_grad must have the shape of x")
    if n == 0 or plane == 0:
        return
    with nogil:
        for c in range(c0, c1):
            if batch_stats:
                _statistics(&x[0, c, 0], n, channels, plane, &mean[c], &var)
                inv_std[c] = 1 / sqrt(var + eps)
            centre = <real>mean[c]
            normaliser = <real>inv_std[c]
            total = 0
            weighted = 0
            for m in range(n):
                row = &x[m, c, 0]
                grad_row = &out_grad[m, c, 0]
                for k in range(plane):
                    total += grad_row[k]
                    weighted += grad_row[k] * ((row[k] - centre) * normaliser)
            shift_grad[c] = total
            scale_grad[c] = weighted
            if not want_data:
                continue
            gain = <real>(scale[c] * inv_std[c])
            if batch_stats:
                mean_grad = <real>(total / count)
                mean_weighted = <real>(weighted / count)
            else:
                mean_grad = 0
                mean_weighted = 0
            for m in range(n):
                row = &x[m, c, 0]
                grad_row = &out_grad[m, c, 0]
                target = &data_grad[m, c, 0]
                for k in range(plane):
                    target[k] = gain * (grad_row[k] - mean_grad - (row[k] - centre) * normaliser * mean_weighted)
