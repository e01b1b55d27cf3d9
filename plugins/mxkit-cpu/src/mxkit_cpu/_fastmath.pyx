# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""float32 tanh, sigmoid and softmax in vectorized passes, and the elementwise part of an LSTM step.

The math and the loops are in ``_fastmath.h`` (branch-free, so the loops compile to SIMD
code); here the arguments are checked (shapes, and that the LSTM step's arrays do not
overlap, which its loops assume) and the loops run without the GIL.
"""

cdef extern from "_fastmath.h" nogil:
    void mxk_tanh_array(const float *x, float *out, Py_ssize_t size)
    void mxk_sigmoid_array(const float *x, float *out, Py_ssize_t size)
    void mxk_tanh_array_scalar(const float *x, float *out, Py_ssize_t size)
    void mxk_sigmoid_array_scalar(const float *x, float *out, Py_ssize_t size)
    void mxk_tanh_array_baseline(const float *x, float *out, Py_ssize_t size)
    void mxk_sigmoid_array_baseline(const float *x, float *out, Py_ssize_t size)
    void mxk_tanh_array_v3(const float *x, float *out, Py_ssize_t size)
    void mxk_sigmoid_array_v3(const float *x, float *out, Py_ssize_t size)
    int mxk_can_run_variant(int variant)
    int mxk_dispatched_variant()
    void mxk_softmax_rows(const float *x, float *out, Py_ssize_t rows, Py_ssize_t cols)
    void mxk_lstm_forward(const float *pre, const float *c_prev, float *gates, float *cells, float *tanh_cells,
                          float *h, Py_ssize_t batch, Py_ssize_t hidden)
    void mxk_lstm_backward(const float *d_h, float *d_c, const float *gates, const float *tanh_cells,
                           const float *c_prev, float *d_pre, Py_ssize_t batch, Py_ssize_t hidden)


#: the code paths of tanh and sigmoid, by name (see _fastmath.h); for tests
VARIANTS = {"scalar": 0, "x86-64": 1, "x86-64-v3": 2}


def runnable_variants():
    """The names of the code paths this CPU can run."""
    return [name for name, number in VARIANTS.items() if mxk_can_run_variant(number)]


def dispatched_variant():
    """The name of the code path that :func:`tanh` and :func:`sigmoid` run on this CPU."""
    number = mxk_dispatched_variant()
    return next(name for name, value in VARIANTS.items() if value == number)


def tanh_variant(str variant, const float[::1] x, float[::1] out):
    """:func:`tanh` through one named code path (``VARIANTS``), for tests of each."""
    _same_size(x.shape[0], out.shape[0], "tanh")
    cdef int number = _runnable(variant)
    if out.shape[0]:
        with nogil:
            if number == 0:
                mxk_tanh_array_scalar(&x[0], &out[0], out.shape[0])
            elif number == 1:
                mxk_tanh_array_baseline(&x[0], &out[0], out.shape[0])
            else:
                mxk_tanh_array_v3(&x[0], &out[0], out.shape[0])


def sigmoid_variant(str variant, const float[::1] x, float[::1] out):
    """:func:`sigmoid` through one named code path (``VARIANTS``), for tests of each."""
    _same_size(x.shape[0], out.shape[0], "sigmoid")
    cdef int number = _runnable(variant)
    if out.shape[0]:
        with nogil:
            if number == 0:
                mxk_sigmoid_array_scalar(&x[0], &out[0], out.shape[0])
            elif number == 1:
                mxk_sigmoid_array_baseline(&x[0], &out[0], out.shape[0])
            else:
                mxk_sigmoid_array_v3(&x[0], &out[0], out.shape[0])


cdef int _runnable(str variant) except -1:
    if variant not in VARIANTS:
        raise ValueError(f"unknown code path {variant!r}; choose one of {sorted(VARIANTS)}")
    if not mxk_can_run_variant(VARIANTS[variant]):
        raise ValueError(f"this CPU cannot run the {variant!r} code path")
    return VARIANTS[variant]


def _same_size(Py_ssize_t a, Py_ssize_t b, str what):
    if a != b:
        raise ValueError(f"{what}: input of {a} elements, output of {b}")


def tanh(const float[::1] x, float[::1] out):
    """``out[:] = tanh(x)`` (``out`` may be ``x``)."""
    _same_size(x.shape[0], out.shape[0], "tanh")
    if out.shape[0]:
        with nogil:
            mxk_tanh_array(&x[0], &out[0], out.shape[0])


def sigmoid(const float[::1] x, float[::1] out):
    """``out[:] = 1 / (1 + exp(-x))`` (``out`` may be ``x``)."""
    _same_size(x.shape[0], out.shape[0], "sigmoid")
    if out.shape[0]:
        with nogil:
            mxk_sigmoid_array(&x[0], &out[0], out.shape[0])


def softmax_rows(const float[:, ::1] x, float[:, ::1] out):
    """``out`` = the softmax of each row of ``x`` (``out`` may be ``x``)."""
    if x.shape[0] != out.shape[0] or x.shape[1] != out.shape[1]:
        raise ValueError(f"softmax_rows: input of shape {(x.shape[0], x.shape[1])}, output of shape "
                         f"{(out.shape[0], out.shape[1])}")
    if x.shape[0] and x.shape[1]:
        with nogil:
            mxk_softmax_rows(&x[0, 0], &out[0, 0], x.shape[0], x.shape[1])


def _check_step(str what, Py_ssize_t batch, Py_ssize_t hidden, dict gate_arrays, dict state_arrays):
    for name, array in gate_arrays.items():
        if tuple(array.shape[:2]) != (batch, 4 * hidden):
            raise ValueError(f"{what}: {name} has shape {tuple(array.shape[:2])}, expected ({batch}, {4 * hidden})")
    for name, array in state_arrays.items():
        if tuple(array.shape[:2]) != (batch, hidden):
            raise ValueError(f"{what}: {name} has shape {tuple(array.shape[:2])}, expected ({batch}, {hidden})")
    spans = sorted((<Py_ssize_t>_start(array), <Py_ssize_t>_start(array) + array.nbytes, name)
                   for name, array in {**gate_arrays, **state_arrays}.items())
    for (_, end, name), (start, _, other) in zip(spans, spans[1:]):
        if start < end:
            raise ValueError(f"{what}: {name} and {other} overlap in memory")


cdef Py_ssize_t _start(const float[:, ::1] array):
    return <Py_ssize_t>&array[0, 0] if array.shape[0] and array.shape[1] else 0


def lstm_forward(const float[:, ::1] pre, const float[:, ::1] c_prev, float[:, ::1] gates,
                 float[:, ::1] cells, float[:, ::1] tanh_cells, float[:, ::1] h):
    """One LSTM step after its products: gate pre-activations ``pre (N, 4H)`` (order i, f, g, o)
    and the previous cell ``c_prev (N, H)`` give the activated ``gates (N, 4H)``, the new cell
    state ``cells``, its tanh ``tanh_cells`` and the new hidden state ``h`` (each ``(N, H)``)."""
    cdef Py_ssize_t batch = c_prev.shape[0], hidden = c_prev.shape[1]
    _check_step("lstm_forward", batch, hidden, {"pre": pre, "gates": gates},
                {"c_prev": c_prev, "cells": cells, "tanh_cells": tanh_cells, "h": h})
    if batch and hidden:
        with nogil:
            mxk_lstm_forward(&pre[0, 0], &c_prev[0, 0], &gates[0, 0], &cells[0, 0], &tanh_cells[0, 0], &h[0, 0],
                             batch, hidden)


def lstm_backward(const float[:, ::1] d_h, float[:, ::1] d_c, const float[:, ::1] gates,
                  const float[:, ::1] tanh_cells, const float[:, ::1] c_prev, float[:, ::1] d_pre):
    """Backward of :func:`lstm_forward` for one step: from the gradients of its hidden state
    ``d_h`` and cell state ``d_c``, the gradients of the gate pre-activations ``d_pre (N, 4H)``;
    ``d_c`` becomes the gradient of the previous cell state (in place)."""
    cdef Py_ssize_t batch = d_h.shape[0], hidden = d_h.shape[1]
    _check_step("lstm_backward", batch, hidden, {"gates": gates, "d_pre": d_pre},
                {"d_h": d_h, "d_c": d_c, "tanh_cells": tanh_cells, "c_prev": c_prev})
    if batch and hidden:
        with nogil:
            mxk_lstm_backward(&d_h[0, 0], &d_c[0, 0], &gates[0, 0], &tanh_cells[0, 0], &c_prev[0, 0], &d_pre[0, 0],
                              batch, hidden)
