# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""SGD, SGD with momentum and Adam updates in one pass over memory.

The generic kernels (mxkit-train's ``update_ops``) make five to ten numpy passes and
temporaries per weight. The loops in ``_update.h`` do the same arithmetic per element, in
the same order and with the same roundings (each scalar coefficient rounded to the array's
dtype, as numpy does with a Python float), so their results equal the generic kernels' to
the bit. Here the arguments are checked and the loops run without the GIL; the weight
output may be the weight itself (how the optimizers call them).
"""

cdef extern from "_update.h" nogil:
    void mxk_sgd_f32(const float *weight, const float *grad, float *out, Py_ssize_t size, float scale, int clip,
                     float bound, float rate, float decay)
    void mxk_sgd_f64(const double *weight, const double *grad, double *out, Py_ssize_t size, double scale,
                     int clip, double bound, double rate, double decay)
    void mxk_sgd_mom_f32(const float *weight, const float *grad, float *mom, float *out, Py_ssize_t size,
                         float scale, int clip, float bound, float rate, int decay, float weight_rate, float keep)
    void mxk_sgd_mom_f64(const double *weight, const double *grad, double *mom, double *out, Py_ssize_t size,
                         double scale, int clip, double bound, double rate, int decay, double weight_rate,
                         double keep)
    void mxk_adam_f32(const float *weight, const float *grad, float *mean, float *var, float *out, Py_ssize_t size,
                      float scale, int decay, float weight_decay, int clip, float bound, float b1, float rest1,
                      float b2, float rest2, float eps, float rate)
    void mxk_adam_f64(const double *weight, const double *grad, double *mean, double *var, double *out,
                      Py_ssize_t size, double scale, int decay, double weight_decay, int clip, double bound,
                      double b1, double rest1, double b2, double rest2, double eps, double rate)

ctypedef fused real:
    float
    double


def _check(str name, arrays):
    size = arrays[0].shape[0]
    for array in arrays[1:]:
        if array.shape[0] != size:
            raise ValueError(f"{name}: arrays of {size} and {array.shape[0]} elements")


def sgd(real[::1] weight, const real[::1] grad, real[::1] out, double lr, double wd, double rescale_grad,
        double clip_gradient):
    """``out = weight * (1 - lr*wd) - lr * clip(rescale_grad * grad)``."""
    _check("sgd_update", [weight, grad, out])
    cdef Py_ssize_t size = weight.shape[0]
    cdef bint clip = clip_gradient >= 0
    cdef double scale = rescale_grad if clip else lr * rescale_grad
    if size == 0:
        return
    with nogil:
        if real is float:
            mxk_sgd_f32(&weight[0], &grad[0], &out[0], size, <float>scale, clip, <float>clip_gradient, <float>lr,
                        <float>(1.0 - lr * wd))
        else:
            mxk_sgd_f64(&weight[0], &grad[0], &out[0], size, scale, clip, clip_gradient, lr, 1.0 - lr * wd)


def sgd_mom(real[::1] weight, const real[::1] grad, real[::1] mom, real[::1] out, double lr, double wd,
            double rescale_grad, double clip_gradient, double momentum):
    """``mom = momentum * mom - (lr * clip(rescale_grad * grad) + lr*wd * weight)``; ``out = weight + mom``."""
    _check("sgd_mom_update", [weight, grad, mom, out])
    cdef Py_ssize_t size = weight.shape[0]
    cdef bint clip = clip_gradient >= 0, decay = wd != 0
    cdef double scale = rescale_grad if clip else lr * rescale_grad
    if size == 0:
        return
    with nogil:
        if real is float:
            mxk_sgd_mom_f32(&weight[0], &grad[0], &mom[0], &out[0], size, <float>scale, clip, <float>clip_gradient,
                            <float>lr, decay, <float>(lr * wd), <float>momentum)
        else:
            mxk_sgd_mom_f64(&weight[0], &grad[0], &mom[0], &out[0], size, scale, clip, clip_gradient, lr, decay,
                            lr * wd, momentum)


def adam(real[::1] weight, const real[::1] grad, real[::1] mean, real[::1] var, real[::1] out, double lr,
         double wd, double rescale_grad, double clip_gradient, double beta1, double beta2, double epsilon):
    """Adam: ``g = clip(rescale_grad * grad + wd * weight)``, the moving mean and variance of
    ``g``, ``out = weight - lr * mean / (sqrt(var) + epsilon)``."""
    _check("adam_update", [weight, grad, mean, var, out])
    cdef Py_ssize_t size = weight.shape[0]
    cdef bint clip = clip_gradient >= 0, decay = wd != 0
    if size == 0:
        return
    with nogil:
        if real is float:
            mxk_adam_f32(&weight[0], &grad[0], &mean[0], &var[0], &out[0], size, <float>rescale_grad, decay,
                         <float>wd, clip, <float>clip_gradient, <float>beta1, <float>(1.0 - beta1), <float>beta2,
                         <float>(1.0 - beta2), <float>epsilon, <float>lr)
        else:
            mxk_adam_f64(&weight[0], &grad[0], &mean[0], &var[0], &out[0], size, rescale_grad, decay, wd, clip,
                         clip_gradient, beta1, 1.0 - beta1, beta2, 1.0 - beta2, epsilon, lr)
