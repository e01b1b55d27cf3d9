"""``softmax`` and ``SoftmaxOutput`` (forward and gradient) over rows, in one compiled pass each.

numpy's softmax is two reductions along a short axis and three passes over the scores, and the
generic ``SoftmaxOutput`` gradient builds a one-hot matrix and two temporaries: on an MLP's
128 x 10 scores each took 20-25 us, more than the 10-way layer that made them. The rows here
go through :func:`mxkit_cpu._fastmath.softmax_rows` and
:func:`mxkit_cpu._elementwise.softmax_output_grad`. Calls these do not cover (float16 and
integer arrays, arrays that are not C-contiguous, a softmax over another axis than the last,
masks, temperatures, label smoothing, ignored labels, ``multi_output``, ``valid``
normalisation, ``out_grad``) go to the generic kernels, which handle every case.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _elementwise, _fastmath
from mxkit_cpu.conv import generic_kernel
from mxkit_cpu.kernels import flat_real_views
from mxkit_cpu.kernels import softmax as numpy_softmax


def _float32_contiguous(*arrays: Any) -> bool:
    return all(type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def _rows(array: np.ndarray, preserve_shape: bool) -> np.ndarray:
    """``array`` as the rows a softmax normalises: (N, everything else), or (everything else, last axis)."""
    if preserve_shape or array.ndim == 0:
        return array.reshape(-1, array.shape[-1] if array.ndim else 1)
    return array.reshape(array.shape[0], -1)


def softmax(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``softmax`` along the last axis of float32 arrays (else mxkit-cpu's numpy kernel)."""
    x, out = inputs[0], outputs[0]
    temperature = params.get("temperature")
    if x.ndim == 0 or params["axis"] not in (-1, x.ndim - 1) or params.get("use_length") \
            or (temperature is not None and temperature != 1.0) or not _float32_contiguous(x, out) \
            or x.size == 0:
        numpy_softmax(xp, inputs, outputs, params)
        return
    _fastmath.softmax_rows(_rows(x, True), _rows(out, True))


def softmax_output(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``SoftmaxOutput`` for float32 data (not ``multi_output``)."""
    x, out = inputs[0], outputs[0]
    if params["multi_output"] or x.ndim == 0 or x.size == 0 or not _float32_contiguous(x, out):
        generic_kernel("SoftmaxOutput", xp, inputs, outputs, params)
        return
    preserve = params["preserve_shape"]
    _fastmath.softmax_rows(_rows(x, preserve), _rows(out, preserve))


def softmax_output_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Gradient of ``SoftmaxOutput`` with one class label per row, normalised by nothing or the batch."""
    _head_grad, output, label = inputs  # (read only with out_grad, the generic kernel's case)
    grad, label_grad = outputs
    if params["multi_output"] or params["preserve_shape"] or params["use_ignore"] or params["smooth_alpha"] \
            or params["out_grad"] or params["normalization"] not in ("null", "batch") or output.ndim == 0 \
            or output.size == 0 or label.shape == output.shape or label.size != output.shape[0] \
            or flat_real_views([output, label, grad]) is None:  # (one real dtype, C-contiguous)
        generic_kernel("_backward_SoftmaxOutput", xp, inputs, outputs, params)
        return
    prob = _rows(output, False)
    scale = params["grad_scale"]
    if params["normalization"] == "batch":
        scale /= prob.shape[0]
    _elementwise.softmax_output_grad(prob, label.reshape(-1), grad.reshape(prob.shape), scale)
    label_grad[...] = 0


#: operator name -> kernel
KERNELS = {
    "softmax": softmax,
    "SoftmaxOutput": softmax_output,
    "_backward_SoftmaxOutput": softmax_output_backward,
}

__all__ = ["KERNELS", "softmax", "softmax_output", "softmax_output_backward"]
