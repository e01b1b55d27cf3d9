"""The published surface for kernel plugins: what a backend's kernels may use of mxkit-ndarray.

A kernel plugin implements the ``mxkit_kernels(registry)`` hook and calls
``registry.register_kernel(operator, backend=<backend name>, kernel=fn)``; ``fn(xp, inputs,
outputs, params)`` receives the backend's array module, the input arrays, the preallocated
output arrays (written in place) and the operator's typed parameters (see
:mod:`mxkit.ndarray.registry`). Everything such a kernel needs from mxkit-ndarray is here,
under names that stay stable; the operator modules' other names are private.

Operators and their reference kernels
    :func:`get_op` (an :class:`OpDef`; ``get_op(name).kernel`` is the generic ``xp`` kernel,
    the fallback a specialised kernel can call for cases it does not handle).
Parameters
    :func:`wanted` (whether an output is read at all: a backward kernel may skip a gradient
    nobody uses), :func:`is_train`, :func:`normalize_axis`, :func:`spatial_tuple` (a kernel,
    stride, dilation or pad parameter as one value per spatial axis).
Convolution and pooling geometry
    :class:`ConvGeometry`, :func:`conv_geometry`, :func:`deconv_geometry`, :class:`PoolGeometry`:
    the validated kernel, stride, dilation, padding and output sizes of one call, computed
    the way the operator's shape inference does.
Kernel memory
    :func:`release_scratch` (drop the idle scratch buffers of a backend's kernels, once a plugin's
    kernels have taken over from them).
Recurrent layers
    :func:`rnn_kernel`, :func:`rnn_backward_kernel` (the ``RNN`` kernels, which take a
    backend's own cell arithmetic as ``cell``, an object with the methods of :class:`CellKernels`).
Fused elementwise programs (operator ``_FusedElemwise``)
    :class:`Program`, :func:`parse_program`, :func:`render_c_expression`,
    :func:`render_c_body`, :func:`render_numexpr`, :data:`FLOAT_DTYPES`, :data:`PRIMITIVES`,
    :class:`FusedProgramError`.

Import this module inside the kernel functions or the hook (as the first-party plugins do),
not at the top of the module that defines the hook: building the operator registry calls
the hook, and the registry is built while ``mxkit.ndarray`` is being imported.
"""

from __future__ import annotations

from mxkit.ndarray.backend import release_scratch
from mxkit.ndarray.ops._fused_program import (
    FLOAT_DTYPES,
    PRIMITIVES,
    FusedProgramError,
    Program,
    parse_program,
    render_c_body,
    render_c_expression,
    render_numexpr,
)
from mxkit.ndarray.ops._rnn_math import CellKernels
from mxkit.ndarray.ops.nn_common import is_train, spatial_tuple, wanted
from mxkit.ndarray.ops.nn_conv import ConvGeometry, conv_geometry, deconv_geometry
from mxkit.ndarray.ops.nn_pool import PoolGeometry
from mxkit.ndarray.ops.nn_rnn import rnn_backward_kernel, rnn_kernel
from mxkit.ndarray.registry import Kernel, OpDef, get_op
from mxkit.ndarray.shapes import normalize_axis

__all__ = ["FLOAT_DTYPES", "PRIMITIVES", "CellKernels", "ConvGeometry", "FusedProgramError", "Kernel", "OpDef",
           "PoolGeometry", "Program", "conv_geometry", "deconv_geometry", "get_op", "is_train", "normalize_axis",
           "parse_program", "release_scratch", "render_c_body", "render_c_expression", "render_numexpr",
           "rnn_backward_kernel", "rnn_kernel", "spatial_tuple", "wanted"]
