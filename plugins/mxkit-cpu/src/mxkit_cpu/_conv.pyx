# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False, language_level=3
"""im2col, col2im and the layout copies around the matrix products of a convolution.

Every function works on a range of samples ``[n0, n1)`` of a (N, C, H, W) array (a 1-D
convolution is the H = 1 case), so that callers can split a batch across threads, each
with its own column buffer. Column matrices are (C * KH * KW, (n1 - n0) * OH * OW): one
row per (channel, kernel offset) in that order, which is the generic kernel's order, so a
(G, C/G * K, M * L) reshape gives each group its rows. Loops run without the GIL; the
products between them are BLAS calls made by the caller.
"""

from libc.string cimport memcpy, memset

ctypedef fused real:
    float
    double


cdef inline Py_ssize_t _first_inside(Py_ssize_t offset, Py_ssize_t stride) noexcept nogil:
    """Smallest x >= 0 with x * stride + offset >= 0."""
    if offset >= 0:
        return 0
    return (-offset + stride - 1) // stride


cdef inline Py_ssize_t _end_inside(Py_ssize_t offset, Py_ssize_t stride, Py_ssize_t size,
                                   Py_ssize_t count) noexcept nogil:
    """One past the largest x < count with x * stride + offset < size (at least 0)."""
    cdef Py_ssize_t end
    if size - offset <= 0:
        return 0
    end = (size - offset + stride - 1) // stride
    return end if end < count else count


def _check_geometry(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t channels, Py_ssize_t kh, Py_ssize_t kw,
                    Py_ssize_t samples, Py_ssize_t oh, Py_ssize_t ow, int stride_h, int stride_w,
                    int dilate_h, int dilate_w):
    if stride_h <= 0 or stride_w <= 0 or dilate_h <= 0 or dilate_w <= 0:
        raise ValueError(f"stride ({stride_h}, {stride_w}) and dilation ({dilate_h}, {dilate_w}) must be positive")
    if rows != channels * kh * kw or cols != samples * oh * ow:
        raise ValueError(f"column buffer has shape ({rows}, {cols}); expected ({channels * kh * kw}, "
                         f"{samples * oh * ow}) for {channels} channels, kernel ({kh}, {kw}), {samples} samples "
                         f"and output ({oh}, {ow})")


def im2col(const real[:, :, :, ::1] data, real[:, ::1] columns, Py_ssize_t n0, Py_ssize_t n1,
           int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w, int dilate_h, int dilate_w,
           Py_ssize_t oh, Py_ssize_t ow):
    """Copy the windows of samples ``[n0, n1)`` of ``data`` into ``columns`` (zeros for the padding)."""
    cdef Py_ssize_t channels = data.shape[1], height = data.shape[2], width = data.shape[3]
    cdef Py_ssize_t n, c, i, j, y, x, row, iy, x_lo, x_hi, ix0, plane = oh * ow
    cdef Py_ssize_t row_stride = columns.shape[1]
    cdef const real* source
    cdef real* target
    _check_geometry(columns.shape[0], columns.shape[1], channels, kh, kw, n1 - n0, oh, ow,
                    stride_h, stride_w, dilate_h, dilate_w)
    if columns.shape[0] == 0 or columns.shape[1] == 0:
        return
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                source = &data[n, c, 0, 0]
                for i in range(kh):
                    for j in range(kw):
                        row = (c * kh + i) * kw + j
                        ix0 = j * dilate_w - pad_w
                        x_lo = _first_inside(ix0, stride_w)
                        x_hi = _end_inside(ix0, stride_w, width, ow)
                        if x_hi < x_lo:
                            x_hi = x_lo
                        for y in range(oh):
                            target = &columns[0, 0] + row * row_stride + (n - n0) * plane + y * ow
                            iy = y * stride_h - pad_h + i * dilate_h
                            if iy < 0 or iy >= height or x_lo >= ow:
                                memset(target, 0, ow * sizeof(real))
                                continue
                            if x_lo > 0:
                                memset(target, 0, x_lo * sizeof(real))
                            if stride_w == 1:  # rows are short: a loop beats memcpy's call
                                for x in range(x_lo, x_hi):
                                    target[x] = source[iy * width + x + ix0]
                            else:
                                for x in range(x_lo, x_hi):
                                    target[x] = source[iy * width + x * stride_w + ix0]
                            if x_hi < ow:
                                memset(target + x_hi, 0, (ow - x_hi) * sizeof(real))


def col2im(const real[:, ::1] columns, real[:, :, :, ::1] grid, Py_ssize_t n0, Py_ssize_t n1,
           int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w, int dilate_h, int dilate_w,
           Py_ssize_t oh, Py_ssize_t ow):
    """Overwrite samples ``[n0, n1)`` of ``grid`` with the sum of the columns over every window
    (the adjoint of :func:`im2col`; values that fall in the padding are dropped)."""
    cdef Py_ssize_t channels = grid.shape[1], height = grid.shape[2], width = grid.shape[3]
    cdef Py_ssize_t n, c, i, j, y, x, row, iy, x_lo, x_hi, ix0, plane = oh * ow
    cdef Py_ssize_t row_stride = columns.shape[1]
    cdef const real* source
    cdef real* target
    _check_geometry(columns.shape[0], columns.shape[1], channels, kh, kw, n1 - n0, oh, ow,
                    stride_h, stride_w, dilate_h, dilate_w)
    if n1 <= n0 or channels == 0 or height * width == 0:
        return
    with nogil:
        memset(&grid[n0, 0, 0, 0], 0, (n1 - n0) * channels * height * width * sizeof(real))
    if plane == 0:
        return
    with nogil:
        for n in range(n0, n1):
            for c in range(channels):
                target = &grid[n, c, 0, 0]
                for i in range(kh):
                    for j in range(kw):
                        row = (c * kh + i) * kw + j
                        ix0 = j * dilate_w - pad_w
                        x_lo = _first_inside(ix0, stride_w)
                        x_hi = _end_inside(ix0, stride_w, width, ow)
                        for y in range(oh):
                            iy = y * stride_h - pad_h + i * dilate_h
                            if iy < 0 or iy >= height:
                                continue
                            source = &columns[0, 0] + row * row_stride + (n - n0) * plane + y * ow
                            if stride_w == 1:
                                for x in range(x_lo, x_hi):
                                    target[iy * width + x + ix0] += source[x]
                            else:
                                for x in range(x_lo, x_hi):
                                    target[iy * width + x * stride_w + ix0] += source[x]


def to_batch_major(const real[:, ::1] products, real[:, :, ::1] out, Py_ssize_t n0, bias=None):
    """``out[n0 + m, f, :] = products[f, m * L:(m + 1) * L] (+ bias[f])`` for every sample m of the block.

    ``products`` is (F, M * L) with the M samples of the block side by side; ``out`` is (N, F, L).
    """
    cdef Py_ssize_t filters = out.shape[1], plane = out.shape[2]
    cdef Py_ssize_t samples, m, f, x
    cdef const real[::1] shift
    cdef bint with_bias = bias is not None
    cdef real b
    cdef real* target
    cdef const real* source
    if products.shape[0] != filters or (plane and products.shape[1] % plane):
        raise ValueError(f"products of shape ({products.shape[0]}, {products.shape[1]}) do not fit an output "
                         f"of {filters} channels of {plane} values")
    samples = products.shape[1] // plane if plane else 0
    if n0 < 0 or n0 + samples > out.shape[0]:
        raise ValueError(f"samples [{n0}, {n0 + samples}) are outside the batch of {out.shape[0]}")
    if with_bias:
        shift = bias
        if shift.shape[0] != filters:
            raise ValueError(f"bias has {shift.shape[0]} values, expected {filters}")
    if samples == 0 or filters == 0:
        return
    with nogil:
        for m in range(samples):
            for f in range(filters):
                target = &out[n0 + m, f, 0]
                source = &products[f, 0] + m * plane
                if with_bias:
                    b = shift[f]
                    for x in range(plane):
                        target[x] = source[x] + b
                else:
                    memcpy(target, source, plane * sizeof(real))


def to_channel_major(const real[:, :, ::1] x, real[:, ::1] out, Py_ssize_t n0, Py_ssize_t n1,
                     double[::1] channel_sums=None):
    """``out[c, m * L:(m + 1) * L] = x[n0 + m, c, :]`` for the block's samples, the inverse of
    :func:`to_batch_major`; with ``channel_sums`` also add each channel's total to it (a bias gradient)."""
    cdef Py_ssize_t channels = x.shape[1], plane = x.shape[2]
    cdef Py_ssize_t m, c, k, samples = n1 - n0
    cdef bint summing = channel_sums is not None
    cdef double total, s0, s1, s2, s3
    cdef const real* source
    cdef real* target
    if out.shape[0] != channels or out.shape[1] != samples * plane:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}); expected ({channels}, "
                         f"{samples * plane})")
    if summing and channel_sums.shape[0] != channels:
        raise ValueError(f"channel_sums has {channel_sums.shape[0]} values, expected {channels}")
    if samples <= 0 or channels == 0 or plane == 0:
        return
    with nogil:
        for c in range(channels):
            total = 0
            for m in range(samples):
                source = &x[n0 + m, c, 0]
                target = &out[c, 0] + m * plane
                memcpy(target, source, plane * sizeof(real))
                if summing:  # four running sums: one would wait on each addition's latency
                    s0 = s1 = s2 = s3 = 0
                    k = 0
                    while k + 4 <= plane:
                        s0 += source[k]
                        s1 += source[k + 1]
                        s2 += source[k + 2]
                        s3 += source[k + 3]
                        k += 4
                    while k < plane:
                        s0 += source[k]
                        k += 1
                    total += (s0 + s1) + (s2 + s3)
            if summing:
                channel_sums[c] += total


def rows_to_batch_major(const real[:, :, ::1] products, real[:, :, ::1] out, Py_ssize_t n0, bias=None):
    """``out[n0 + m, g * Fg + f, l] = products[g, m * L + l, f] (+ bias[g * Fg + f])``.

    ``products`` is (G, M * L, F/G): a product computed with the positions as rows (the
    orientation BLAS runs fastest for a few filters against many positions); ``out`` is (N, F, L).
    """
    cdef Py_ssize_t groups = products.shape[0], per_group = products.shape[2]
    cdef Py_ssize_t filters = out.shape[1], plane = out.shape[2]
    cdef Py_ssize_t samples, m, g, f, l
    cdef const real[::1] shift
    cdef bint with_bias = bias is not None
    cdef real* target
    cdef const real* source
    if groups * per_group != filters or (plane and products.shape[1] % plane):
        raise ValueError(f"products of shape ({groups}, {products.shape[1]}, {per_group}) do not fit an output "
                         f"of {filters} channels of {plane} values")
    samples = products.shape[1] // plane if plane else 0
    if n0 < 0 or n0 + samples > out.shape[0]:
        raise ValueError(f"samples [{n0}, {n0 + samples}) are outside the batch of {out.shape[0]}")
    if with_bias:
        shift = bias
        if shift.shape[0] != filters:
            raise ValueError(f"bias has {shift.shape[0]} values, expected {filters}")
    if samples == 0 or filters == 0:
        return
    with nogil:
        for m in range(samples):
            for g in range(groups):
                source = &products[g, m * plane, 0]
                target = &out[n0 + m, g * per_group, 0]
                for f in range(per_group):
                    if with_bias:
                        for l in range(plane):
                            target[f * plane + l] = source[l * per_group + f] + shift[g * per_group + f]
                    else:
                        for l in range(plane):
                            target[f * plane + l] = source[l * per_group + f]
