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
from libc.stdlib cimport free, malloc
from libc.string cimport memset

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


cdef inline Py_ssize_t _low(Py_ssize_t start) noexcept nogil:
    """First kernel offset whose cell ``start + offset`` is at or past 0."""
    return -start if start < 0 else 0


cdef inline Py_ssize_t _high(Py_ssize_t start, Py_ssize_t kernel, Py_ssize_t size) noexcept nogil:
    """One past the last kernel offset whose cell ``start + offset`` is before ``size``."""
    return size - start if start + kernel > size else kernel


cdef inline real _window_max(const real* plane, Py_ssize_t width, Py_ssize_t height, Py_ssize_t y0,
                             Py_ssize_t x0, Py_ssize_t kh, Py_ssize_t kw, bint inside,
                             real lowest) noexcept nogil:
    """np.maximum over the window in row-major order (NaN wins), cells outside reading ``lowest``."""
    cdef Py_ssize_t i, j, iy, ix
    cdef const real* row
    cdef real acc, value
    if inside:
        acc = plane[y0 * width + x0]
        for i in range(kh):
            row = plane + (y0 + i) * width + x0
            for j in range(kw):
                value = row[j]
                if value > acc or value != value:
                    acc = value
        return acc
    for i in range(kh):
        iy = y0 + i
        for j in range(kw):
            ix = x0 + j
            value = plane[iy * width + ix] if 0 <= iy < height and 0 <= ix < width else lowest
            if (i == 0 and j == 0) or value > acc or value != value:
                acc = value
    return acc


cdef inline Py_ssize_t _window_argmax(const real* plane, Py_ssize_t width, Py_ssize_t height, Py_ssize_t y0,
                                      Py_ssize_t x0, Py_ssize_t kh, Py_ssize_t kw, real target,
                                      real lowest) noexcept nogil:
    """Index in ``plane`` of the first window cell equal to ``target``; -1 when none is (or the first
    equal cell is outside the input, where the gradient is dropped)."""
    cdef Py_ssize_t i, j, iy, ix
    cdef bint inside
    cdef const real* row
    cdef Py_ssize_t found = -1
    if y0 >= 0 and x0 >= 0 and y0 + kh <= height and x0 + kw <= width:
        # backwards without branches: the first match in row-major order is the last one kept
        # (where the maximum sits is random, so an early exit mispredicts once per window)
        for i in range(kh - 1, -1, -1):
            row = plane + (y0 + i) * width + x0
            for j in range(kw - 1, -1, -1):
                found = (y0 + i) * width + x0 + j if row[j] == target else found
        return found
    for i in range(kh):
        iy = y0 + i
        for j in range(kw):
            ix = x0 + j
            inside = 0 <= iy < height and 0 <= ix < width
            if (plane[iy * width + ix] if inside else lowest) == target:
                return iy * width + ix if inside else -1
    return -1


cdef inline Py_ssize_t _first_at_least(Py_ssize_t pad, Py_ssize_t stride, Py_ssize_t count) noexcept nogil:
    """Smallest x with x * stride >= pad (capped at count)."""
    cdef Py_ssize_t x = (pad + stride - 1) // stride
    return x if x < count else count


cdef inline Py_ssize_t _last_fitting(Py_ssize_t limit, Py_ssize_t stride, Py_ssize_t count) noexcept nogil:
    """One past the largest x with x * stride <= limit (within [0, count])."""
    cdef Py_ssize_t x
    if limit < 0:
        return 0
    x = limit // stride + 1
    return x if x < count else count


cdef inline void _interior_row(const real* top, Py_ssize_t width, real* target, Py_ssize_t x_lo, Py_ssize_t x_hi,
                               Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t stride, Py_ssize_t pad,
                               int mode) noexcept nogil:
    """Max or sum of the windows ``x_lo .. x_hi - 1`` of one output row, all inside the input."""
    cdef Py_ssize_t i, j, x
    cdef const real* row
    cdef real value, acc
    for x in range(x_lo, x_hi):
        target[x] = top[x * stride - pad] if mode == MAX_POOL else 0
    for i in range(kh):
        row = top + i * width - pad
        for j in range(kw):
            if mode == MAX_POOL:
                for x in range(x_lo, x_hi):
                    value = row[x * stride + j]
                    acc = target[x]
                    target[x] = value if (value > acc or value != value) else acc
            else:
                for x in range(x_lo, x_hi):
                    target[x] = target[x] + row[x * stride + j]


cdef inline void _interior_argmax_row(const real* top, Py_ssize_t width, const real* targets, Py_ssize_t* cells,
                                      Py_ssize_t x_lo, Py_ssize_t x_hi, Py_ssize_t kh, Py_ssize_t kw,
                                      Py_ssize_t stride, Py_ssize_t pad, Py_ssize_t first_cell) noexcept nogil:
    """For windows ``x_lo .. x_hi - 1`` of one output row, all inside the input: the index (from
    ``first_cell``, the row's top-left input cell) of the first cell equal to the output, or -1.

    One pass per kernel offset, last offset first, so the first match in row-major order is the
    one left standing; the passes are branch-free along the row.
    """
    cdef Py_ssize_t i, j, x, base, hit
    cdef const real* row
    for x in range(x_lo, x_hi):
        cells[x] = -1
    for i in range(kh - 1, -1, -1):
        row = top + i * width - pad
        for j in range(kw - 1, -1, -1):
            base = first_cell + i * width - pad + j
            for x in range(x_lo, x_hi):
                # arithmetic, not a conditional store (which compiles to a mispredicted branch)
                hit = row[x * stride + j] == targets[x]
                cells[x] += hit * (base + x * stride - cells[x])


cdef inline Py_ssize_t _divisor(Py_ssize_t y0, Py_ssize_t x0, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t height,
                                Py_ssize_t width, Py_ssize_t pad_h, Py_ssize_t pad_w, bint include_pad) noexcept nogil:
    cdef Py_ssize_t count
    if include_pad:
        count = _count(y0, kh, -pad_h, height + pad_h) * _count(x0, kw, -pad_w, width + pad_w)
    else:
        count = _count(y0, kh, 0, height) * _count(x0, kw, 0, width)
    return count if count > 1 else 1


def pool_forward(const real[:, :, :, ::1] data, real[:, :, :, ::1] out, Py_ssize_t n0, Py_ssize_t n1,
                 str pool_type, int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                 bint include_pad):
    """Pool samples ``[n0, n1)`` of ``data`` (N, C, H, W) into ``out`` (N, C, OH, OW)."""
    cdef int mode = _mode(pool_type)
    cdef Py_ssize_t channels = data.shape[1], height = data.shape[2], width = data.shape[3]
    cdef Py_ssize_t oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t n, c, y, x, i, j, y0, x0, i_lo, i_hi, j_lo, j_hi, x_in_lo, x_in_hi
    cdef bint rows_inside
    cdef real acc, lowest
    cdef const real* plane
    cdef const real* row
    cdef real* target
    _check(n0, n1, _shape(data.shape), _shape(out.shape), stride_h, stride_w)
    if real is float:
        lowest = -FLT_MAX
    else:
        lowest = -DBL_MAX
    if n1 <= n0 or channels == 0 or oh * ow == 0 or height * width == 0:
        return
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                plane = &data[n, c, 0, 0]
                target = &out[n, c, 0, 0]
                for y in range(oh):
                    y0 = y * stride_h - pad_h
                    i_lo, i_hi = _low(y0), _high(y0, kh, height)
                    rows_inside = i_lo == 0 and i_hi == kh
                    # windows wholly inside the input: one pass per kernel offset along the output row,
                    # in the generic kernel's order of offsets (the same sums to the bit)
                    x_in_lo, x_in_hi = ow, ow
                    if rows_inside:
                        x_in_lo = _first_at_least(pad_w, stride_w, ow)
                        x_in_hi = _last_fitting(width + pad_w - kw, stride_w, ow)
                        if x_in_hi <= x_in_lo:
                            x_in_lo, x_in_hi = ow, ow
                        else:
                            _interior_row(plane + y0 * width, width, target + y * ow, x_in_lo, x_in_hi,
                                          kh, kw, stride_w, pad_w, mode)
                            if mode == AVG_POOL:
                                for x in range(x_in_lo, x_in_hi):
                                    target[y * ow + x] = target[y * ow + x] / <real>(kh * kw if kh * kw > 1 else 1)
                    for x in range(ow):
                        if x_in_lo <= x < x_in_hi:
                            continue
                        x0 = x * stride_w - pad_w
                        j_lo, j_hi = _low(x0), _high(x0, kw, width)
                        if mode == MAX_POOL:
                            acc = _window_max(plane, width, height, y0, x0, kh, kw,
                                              rows_inside and j_lo == 0 and j_hi == kw, lowest)
                        else:
                            acc = 0
                            for i in range(i_lo, i_hi):
                                row = plane + (y0 + i) * width + x0
                                for j in range(j_lo, j_hi):
                                    acc = acc + row[j]
                            if mode == AVG_POOL:
                                acc = acc / <real>_divisor(y0, x0, kh, kw, height, width, pad_h, pad_w,
                                                           include_pad)
                        target[y * ow + x] = acc


def pool_backward(const real[:, :, :, ::1] out_grad, const real[:, :, :, ::1] data,
                  const real[:, :, :, ::1] output, real[:, :, :, ::1] grad, Py_ssize_t n0, Py_ssize_t n1,
                  str pool_type, int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                  bint include_pad):
    """Overwrite samples ``[n0, n1)`` of ``grad`` (N, C, H, W) with the gradient of the pooling."""
    cdef int mode = _mode(pool_type)
    cdef Py_ssize_t channels = data.shape[1], height = data.shape[2], width = data.shape[3]
    cdef Py_ssize_t oh = output.shape[2], ow = output.shape[3]
    cdef Py_ssize_t n, c, y, x, i, j, y0, x0, i_lo, i_hi, j_lo, j_hi, cell, x_in_lo, x_in_hi
    cdef Py_ssize_t* cells
    cdef real share, lowest
    cdef const real* plane
    cdef const real* outputs
    cdef const real* grads
    cdef real* grad_plane
    cdef real* row
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
    cells = <Py_ssize_t*>malloc((ow if ow > 0 else 1) * sizeof(Py_ssize_t))
    if cells == NULL:
        raise MemoryError(f"no memory for {ow} window indices")
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                plane = &data[n, c, 0, 0]
                grad_plane = &grad[n, c, 0, 0]
                # zeroed plane by plane, so that it is still in cache when the gradients land
                memset(grad_plane, 0, height * width * sizeof(real))
                if oh * ow == 0:
                    continue
                outputs = &output[n, c, 0, 0]
                grads = &out_grad[n, c, 0, 0]
                for y in range(oh):
                    y0 = y * stride_h - pad_h
                    i_lo, i_hi = _low(y0), _high(y0, kh, height)
                    x_in_lo, x_in_hi = ow, ow
                    if mode == MAX_POOL and i_lo == 0 and i_hi == kh:
                        x_in_lo = _first_at_least(pad_w, stride_w, ow)
                        x_in_hi = _last_fitting(width + pad_w - kw, stride_w, ow)
                        if x_in_hi <= x_in_lo:
                            x_in_lo, x_in_hi = ow, ow
                        else:
                            _interior_argmax_row(plane + y0 * width, width, outputs + y * ow, cells, x_in_lo,
                                                 x_in_hi, kh, kw, stride_w, pad_w, y0 * width)
                            for x in range(x_in_lo, x_in_hi):
                                if cells[x] >= 0:
                                    grad_plane[cells[x]] += grads[y * ow + x]
                    for x in range(ow):
                        if x_in_lo <= x < x_in_hi:
                            continue
                        x0 = x * stride_w - pad_w
                        if mode == MAX_POOL:
                            cell = _window_argmax(plane, width, height, y0, x0, kh, kw, outputs[y * ow + x], lowest)
                            if cell >= 0:
                                grad_plane[cell] += grads[y * ow + x]
                            continue
                        j_lo, j_hi = _low(x0), _high(x0, kw, width)
                        share = grads[y * ow + x]
                        if mode == AVG_POOL:
                            share = share / <real>_divisor(y0, x0, kh, kw, height, width, pad_h, pad_w, include_pad)
                        for i in range(i_lo, i_hi):
                            row = grad_plane + (y0 + i) * width + x0
                            for j in range(j_lo, j_hi):
                                row[j] += share
    free(cells)
