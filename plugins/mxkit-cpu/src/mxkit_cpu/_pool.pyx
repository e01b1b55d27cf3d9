# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False, language_level=3
"""Max, average and sum pooling over 2-D windows (1-D is the H = 1 case), forward and backward.

The semantics are the generic kernel's (``mxkit.ndarray.ops.nn_pool``), cell for cell:

- a window cell outside the input (padding, or the overhang of the ``full`` convention)
  reads as the lowest finite value for max pooling and as 0 otherwise;
- max pooling propagates NaN, and its gradient goes to the first cell of the window, in
  row-major order, whose value equals the forward output (a padding cell that matches
  takes the gradient away);
- average pooling divides by the cells inside the padded extent (``include_pad``) or
  inside the input, at least 1.

Each function handles samples ``[n0, n1)`` so that a batch can be split across threads.
"""

from libc.float cimport DBL_MAX, FLT_MAX

ctypedef fused real:
    float
    double

cdef enum:
    MAX_POOL = 0
    AVG_POOL = 1
    SUM_POOL = 2


cdef inline Py_ssize_t _count(Py_ssize_t start, Py_ssize_t kernel, Py_ssize_t low, Py_ssize_t high) noexcept nogil:
    """How many of ``start .. start + kernel - 1`` lie in ``[low, high)``."""
    cdef Py_ssize_t lo = start if start > low else low
    cdef Py_ssize_t hi = start + kernel if start + kernel < high else high
    return hi - lo if hi > lo else 0


cdef tuple _shape(Py_ssize_t* shape):
    return (shape[0], shape[1], shape[2], shape[3])


def _mode(str pool_type):
    if pool_type == "max":
        return MAX_POOL
    if pool_type == "avg":
        return AVG_POOL
    if pool_type == "sum":
        return SUM_POOL
    raise ValueError(f"pool_type={pool_type!r} is not handled here; use max, avg or sum")


def _check(Py_ssize_t n0, Py_ssize_t n1, tuple data_shape, tuple out_shape, int stride_h, int stride_w):
    if stride_h <= 0 or stride_w <= 0:
        raise ValueError(f"stride ({stride_h}, {stride_w}) must be positive")
    if data_shape[:2] != out_shape[:2]:
        raise ValueError(f"data shape {data_shape} and output shape {out_shape} differ in batch or channels")
    if not 0 <= n0 <= n1 <= data_shape[0]:
        raise ValueError(f"samples [{n0}, {n1}) are outside the batch of {data_shape[0]}")


def pool_forward(const real[:, :, :, ::1] data, real[:, :, :, ::1] out, Py_ssize_t n0, Py_ssize_t n1,
                 str pool_type, int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                 bint include_pad):
    """Pool samples ``[n0, n1)`` of ``data`` (N, C, H, W) into ``out`` (N, C, OH, OW)."""
    cdef int mode = _mode(pool_type)
    cdef Py_ssize_t channels = data.shape[1], height = data.shape[2], width = data.shape[3]
    cdef Py_ssize_t oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t n, c, y, x, i, j, y0, x0, iy, ix, count
    cdef bint first, inside_y
    cdef real value, acc, lowest
    cdef const real* plane
    _check(n0, n1, _shape(data.shape), _shape(out.shape), stride_h, stride_w)
    if real is float:
        lowest = -FLT_MAX
    else:
        lowest = -DBL_MAX
    if n1 <= n0 or channels == 0 or oh * ow == 0:
        return
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                plane = &data[n, c, 0, 0] if height * width else NULL
                for y in range(oh):
                    y0 = y * stride_h - pad_h
                    for x in range(ow):
                        x0 = x * stride_w - pad_w
                        first = True
                        acc = 0
                        for i in range(kh):
                            iy = y0 + i
                            inside_y = 0 <= iy < height
                            for j in range(kw):
                                ix = x0 + j
                                if mode == MAX_POOL:
                                    value = plane[iy * width + ix] if inside_y and 0 <= ix < width else lowest
                                    # np.maximum's rule: a NaN anywhere makes the result NaN
                                    if first or value > acc or value != value:
                                        if acc == acc or first:
                                            acc = value
                                    first = False
                                elif inside_y and 0 <= ix < width:
                                    acc = acc + plane[iy * width + ix]
                        if mode == AVG_POOL:
                            if include_pad:
                                count = _count(y0, kh, -pad_h, height + pad_h) * _count(x0, kw, -pad_w, width + pad_w)
                            else:
                                count = _count(y0, kh, 0, height) * _count(x0, kw, 0, width)
                            acc = acc / <real>(count if count > 1 else 1)
                        out[n, c, y, x] = acc


def pool_backward(const real[:, :, :, ::1] out_grad, const real[:, :, :, ::1] data,
                  const real[:, :, :, ::1] output, real[:, :, :, ::1] grad, Py_ssize_t n0, Py_ssize_t n1,
                  str pool_type, int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                  bint include_pad):
    """Overwrite samples ``[n0, n1)`` of ``grad`` (N, C, H, W) with the gradient of the pooling."""
    cdef int mode = _mode(pool_type)
    cdef Py_ssize_t channels = data.shape[1], height = data.shape[2], width = data.shape[3]
    cdef Py_ssize_t oh = output.shape[2], ow = output.shape[3]
    cdef Py_ssize_t n, c, y, x, i, j, y0, x0, iy, ix, count, k
    cdef bint found, inside
    cdef real value, target, share, lowest
    cdef const real* plane
    cdef real* grad_plane
    _check(n0, n1, _shape(data.shape), _shape(output.shape), stride_h, stride_w)
    if _shape(out_grad.shape) != _shape(output.shape) or _shape(grad.shape) != _shape(data.shape):
        raise ValueError(f"out_grad {_shape(out_grad.shape)} must match the output {_shape(output.shape)} "
                         f"and grad {_shape(grad.shape)} the data {_shape(data.shape)}")
    if real is float:
        lowest = -FLT_MAX
    else:
        lowest = -DBL_MAX
    if n1 <= n0 or channels == 0 or height * width == 0:
        return
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                plane = &data[n, c, 0, 0]
                grad_plane = &grad[n, c, 0, 0]
                for k in range(height * width):
                    grad_plane[k] = 0
                for y in range(oh):
                    y0 = y * stride_h - pad_h
                    for x in range(ow):
                        x0 = x * stride_w - pad_w
                        if mode == MAX_POOL:
                            target = output[n, c, y, x]
                            found = False
                            for i in range(kh):
                                iy = y0 + i
                                for j in range(kw):
                                    ix = x0 + j
                                    inside = 0 <= iy < height and 0 <= ix < width
                                    value = plane[iy * width + ix] if inside else lowest
                                    if value == target:
                                        if inside:
                                            grad_plane[iy * width + ix] += out_grad[n, c, y, x]
                                        found = True
                                        break
                                if found:
                                    break
                            continue
                        share = out_grad[n, c, y, x]
                        if mode == AVG_POOL:
                            if include_pad:
                                count = _count(y0, kh, -pad_h, height + pad_h) * _count(x0, kw, -pad_w, width + pad_w)
                            else:
                                count = _count(y0, kh, 0, height) * _count(x0, kw, 0, width)
                            share = share / <real>(count if count > 1 else 1)
                        for i in range(kh):
                            iy = y0 + i
                            if iy < 0 or iy >= height:
                                continue
                            for j in range(kw):
                                ix = x0 + j
                                if 0 <= ix < width:
                                    grad_plane[iy * width + ix] += share
