# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""Scatter-add of rows, the core of ``take``'s (embedding lookup's) gradient.

``numpy.add.at`` handles repeated indices correctly but slowly (an element at a time
through the ufunc machinery); this loop adds whole rows, without the GIL.
"""

ctypedef fused real:
    float
    double


def scatter_add_rows(real[:, ::1] out, const long long[::1] rows, const real[:, ::1] values):
    """``out[rows[i]] += values[i]`` for every i, repeated rows accumulating.

    Every row index must already be in ``[0, out.shape[0])`` (the caller checks).
    """
    cdef Py_ssize_t i, j, row
    cdef Py_ssize_t count = rows.shape[0]
    cdef Py_ssize_t width = out.shape[1]
    if values.shape[0] != count or values.shape[1] != width:
        raise ValueError(f"values must have shape ({count}, {width}), got "
                         f"({values.shape[0]}, {values.shape[1]})")
    with nogil:
        for i in range(count):
            row = rows[i]
            for j in range(width):
                out[row, j] += values[i, j]
