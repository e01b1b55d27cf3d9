"""``Deconvolution`` forward, data gradient and weight gradient on oneDNN's deconvolution primitive.

A deconvolution is the adjoint of a convolution, and the programs are the convolution's
(:func:`mxkit_onednn.conv.build_forward` and :func:`~mxkit_onednn.conv.build_backward`, each shape
choosing among mxkit-cpu's kernel, oneDNN's blocked layout and numpy's) on oneDNN's deconvolution
primitives. The geometry is mxkit's (:func:`mxkit.ndarray.kernels.deconv_geometry`: the padding that
``target_shape`` implies, ``adj``): oneDNN pads ``pad`` before each axis and ``pad - adj`` after it.
Where ``adj`` passes ``pad`` (output rows beyond the full deconvolution, which only the bias reaches)
the replaced kernel serves. mxkit holds the weights as MXNet does, (channels, filters / groups,
window), which oneDNN reads as its (groups,) filters, channels, window weights laid out channels first.
"""

from __future__ import annotations

import copy
from typing import Any

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import ConvGeometry, apart, float32_arrays, run_backward, run_forward
from mxkit_onednn.kernels import ANY, Unhandled, handles

#: the parameters of ``Deconvolution`` the kernels implement: the geometry, and MXNet's hints to its GPU kernels
#: and its temporary buffers (``workspace``, ``cudnn_*``), which change how a result is computed, not the result
HANDLES = dict(kernel=ANY, stride=ANY, dilate=ANY, pad=ANY, adj=ANY, target_shape=ANY, num_filter=ANY,
               num_group=ANY, no_bias=ANY, workspace=ANY, cudnn_tune=ANY, cudnn_off=ANY,
               layout=(None, "NCW", "NCHW"))


class DeconvGeometry(ConvGeometry):
    """One deconvolution call in oneDNN's terms (2-D, dilation counted as gaps): ``src`` the data,
    ``dst`` the (larger) result."""

    kind = "deconvolution"

    def __init__(self, params: dict, data_shape: tuple, weight_shape: tuple, out_shape: tuple) -> None:
        kernel = tuple(params["kernel"])
        if len(kernel) not in (1, 2) or len(data_shape) != len(kernel) + 2:
            raise Unhandled
        geometry, adj, out_spatial = _mxkit.deconv_geometry(params, data_shape)
        if tuple(int(d) for d in out_shape[2:]) != tuple(out_spatial):
            raise Unhandled
        stride, dilate, pad = geometry.stride, geometry.dilate, geometry.pad
        pad_r = tuple(p - a for p, a in zip(pad, adj))
        if any(r < 0 for r in pad_r):
            raise Unhandled  # rows past the full deconvolution: oneDNN's padding cannot be negative
        if len(kernel) == 1:  # one row high
            kernel, stride, dilate, pad, pad_r = (1, *kernel), (1, *stride), (1, *dilate), (0, *pad), (0, *pad_r)
            data_shape, out_shape = (*data_shape[:2], 1, data_shape[2]), (*out_shape[:2], 1, out_shape[2])
        self.groups = int(geometry.groups)
        self.src = tuple(int(d) for d in data_shape)
        self.dst = tuple(int(d) for d in out_shape)
        channels, per_group = int(weight_shape[0]), int(weight_shape[1])
        filters = per_group * self.groups
        if self.groups == 1:  # (filters, channels, window), laid out channels first
            self.weights, self.order = (filters, channels, *kernel), "bacd"
        else:  # (groups, filters / groups, channels / groups, window), laid out group, channel, filter
            self.weights, self.order = (self.groups, per_group, channels // self.groups, *kernel), "acbde"
        self.bias = None if params["no_bias"] else (filters,)
        self.strides = tuple(stride)
        self.dilates = tuple(d - 1 for d in dilate)
        self.pad_l, self.pad_r = tuple(pad), pad_r

    def with_batch(self, batch: int) -> DeconvGeometry:
        chunk = copy.copy(self)
        chunk.src, chunk.dst = (batch, *self.src[1:]), (batch, *self.dst[1:])
        return chunk

    def weights_md(self, dnnl: Any) -> Any:
        return dnnl.tagged_md(self.weights, self.order)


@handles(**HANDLES)
def deconvolution(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Deconvolution``."""
    arrays = float32_arrays([*inputs[:2 if params["no_bias"] else 3], outputs[0]])
    apart(outputs, inputs)
    g = DeconvGeometry(params, arrays[0].shape, arrays[1].shape, outputs[0].shape)
    run_forward("Deconvolution", g, arrays, outputs, replaced)


@handles(**HANDLES)
def deconvolution_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_Deconvolution``: the data gradient (unless nothing reads it), the weight and bias gradients."""
    arrays = float32_arrays(list(inputs) + list(outputs))
    apart(outputs, inputs)
    out_grad, data, weight = arrays[:3]
    g = DeconvGeometry(params, data.shape, weight.shape, out_grad.shape)
    run_backward("_backward_Deconvolution", g, _mxkit.wanted(params, 0), [out_grad, data, weight], outputs,
                 replaced)


__all__ = ["HANDLES", "DeconvGeometry", "deconvolution", "deconvolution_backward"]
