# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""SGD, SGD with momentum and Adam updates in one pass over memory.

The generic kernels (mxkit-train's ``update_ops``) make five to ten numpy passes and
temporaries per weight. These loops do the same arithmetic per element, in the same order
and with the same roundings (each scalar coefficient rounded to the array's dtype, as numpy
does with a Python float), so their results equal the generic kernels' to the bit. The
weight output may be the weight itself (how the optimizers call them).
"""

from libc.math cimport sqrt, sqrtf

ctypedef fused real:
    float
    double


cdef inline real _clipped(real value, real bound, bint clip) noexcept nogil:
    if clip:
        if value < -bound:
            return -bound
        if value > bound:
            return bound
    return value


cdef inline real _root(real value) noexcept nogil:
    if real is float:
        return sqrtf(value)
    return sqrt(value)


def _check(str name, arrays):
    size = arrays[0].shape[0]
    for array in arrays[1:]:
        if array.shape[0] != size:
            raise ValueError(f"{name}: arrays of {size} and {array.shape[0]} elements")


def sgd(real[::1] weight, const real[::1] grad, real[::1] out, double lr, double wd, double rescale_grad,
        double clip_gradient):
    """``out = weight * (1 - lr*wd) - lr * clip(rescale_grad * grad)``."""
    _check("sgd_update", [weight, grad, out])
    cdef bint clip = clip_gradient >= 0
    cdef real scale = <real>(rescale_grad if clip else lr * rescale_grad)
    cdef real bound = <real>clip_gradient, rate = <real>lr, decay = <real>(1.0 - lr * wd), step
    cdef Py_ssize_t i
    with nogil:
        for i in range(weight.shape[0]):
            step = grad[i] * scale
            if clip:
                step = _clipped(step, bound, True) * rate
            out[i] = weight[i] * decay - step


def sgd_mom(real[::1] weight, const real[::1] grad, real[::1] mom, real[::1] out, double lr, double wd,
            double rescale_grad, double clip_gradient, double momentum):
    """``mom = momentum * mom - (lr * clip(rescale_grad * grad) + lr*wd * weight)``; ``out = weight + mom``."""
    _check("sgd_mom_update", [weight, grad, mom, out])
    cdef bint clip = clip_gradient >= 0, decay = wd != 0
    cdef real scale = <real>(rescale_grad if clip else lr * rescale_grad)
    cdef real bound = <real>clip_gradient, rate = <real>lr, weight_rate = <real>(lr * wd)
    cdef real keep = <real>momentum, step, m
    cdef Py_ssize_t i
    with nogil:
        for i in range(weight.shape[0]):
            step = grad[i] * scale
            if clip:
                step = _clipped(step, bound, True) * rate
            if decay:
                step = step + weight[i] * weight_rate
            m = mom[i] * keep
            m = m - step
            mom[i] = m
            out[i] = weight[i] + m


def adam(real[::1] weight, const real[::1] grad, real[::1] mean, real[::1] var, real[::1] out, double lr,
         double wd, double rescale_grad, double clip_gradient, double beta1, double beta2, double epsilon):
    """Adam: ``g = clip(rescale_grad * grad + wd * weight)``, the moving mean and variance of
    ``g``, ``out = weight - lr * mean / (sqrt(var) + epsilon)``."""
    _check("adam_update", [weight, grad, mean, var, out])
    cdef bint clip = clip_gradient >= 0, decay = wd != 0
    cdef real scale = <real>rescale_grad, bound = <real>clip_gradient, weight_decay = <real>wd
    cdef real b1 = <real>beta1, b2 = <real>beta2, rest1 = <real>(1.0 - beta1), rest2 = <real>(1.0 - beta2)
    cdef real eps = <real>epsilon, rate = <real>lr, g, m, v, denom
    cdef Py_ssize_t i
    with nogil:
        for i in range(weight.shape[0]):
            g = grad[i] * scale
            if decay:
                g = g + weight[i] * weight_decay
            g = _clipped(g, bound, clip)
            m = mean[i] * b1
            m = m + g * rest1
            mean[i] = m
            v = var[i] * b2
            v = v + (g * g) * rest2
            var[i] = v
            denom = _root(v) + eps
            out[i] = weight[i] - (m / denom) * rate
