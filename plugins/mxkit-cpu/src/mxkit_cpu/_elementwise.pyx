# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False, language_level=3
"""One-pass gradients of the activations that keep their output ``y``: each reads ``out_grad`` and
``y`` once and writes the result once, where the numpy expression makes two or three temporaries.
The arithmetic is the generic kernel's, in its order and dtype (the same values to the bit).
"""

ctypedef fused real:
    float
    double


def _check(Py_ssize_t a, Py_ssize_t b, Py_ssize_t c):
    if a != b or a != c:
        raise ValueError(f"out_grad, output and result must have one size, got {a}, {b} and {c}")


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

