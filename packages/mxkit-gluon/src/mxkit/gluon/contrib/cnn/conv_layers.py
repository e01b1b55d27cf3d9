"""Deformable convolutions v1 (Dai et al., 2017) and v2 (Zhu et al., 2018) as Gluon layers.

Each layer holds two convolutions: an ordinary one computing the sampling offsets from the
input (its weights start at zero, so a new layer samples the regular grid), and the deformable
one (``_contrib_DeformableConvolution`` / ``_contrib_ModulatedDeformableConvolution``) reading
the input at the offset positions. The modulated layer's offset convolution also yields the
mask, ``2 * sigmoid(.)``, as MXNet's. Parameter names and order are MXNet 1.9.1's.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock
from mxkit.gluon.nn.activations import Activation
from mxkit.gluon.parameter import GluonError

__all__ = ["DeformableConvolution", "ModulatedDeformableConvolution"]


def _pair(value: Any, what: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise GluonError(f"{what} must be an int or a pair of ints (a 2-D deformable convolution), got {value}")
    return value  # type: ignore[return-value]


class _Deformable(HybridBlock):
    _modulated = False

    def __init__(self, channels: int, kernel_size: Any = (1, 1), strides: Any = (1, 1), padding: Any = (0, 0),
                 dilation: Any = (1, 1), groups: int = 1, num_deformable_group: int = 1, layout: str = "NCHW",
                 use_bias: bool = True, in_channels: int = 0, activation: str | None = None,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 offset_weight_initializer: Any = "zeros", offset_bias_initializer: Any = "zeros",
                 offset_use_bias: bool = True, op_name: str | None = None, adj: Any = None,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        if layout != "NCHW":
            raise GluonError(f"{type(self).__name__}: layout {layout!r} is not supported; the deformable "
                             f"convolution operators take NCHW data")
        if adj:
            raise GluonError(f"{type(self).__name__}: adj (output padding) applies to transposed convolutions only")
        kernel = _pair(kernel_size, "kernel_size")
        taps = kernel[0] * kernel[1] * num_deformable_group
        geometry = {"kernel": kernel, "stride": _pair(strides, "strides"), "dilate": _pair(dilation, "dilation"),
                    "pad": _pair(padding, "padding"), "num_group": groups, "layout": layout}
        self._channels, self._in_channels = channels, in_channels
        self._split = 2 * taps
        self._kwargs_offset = {**geometry, "num_filter": (3 if self._modulated else 2) * taps,
                               "no_bias": not offset_use_bias}
        self._kwargs_deformable_conv = {**geometry, "num_filter": channels, "no_bias": not use_bias,
                                        "num_deformable_group": num_deformable_group}
        per_group = in_channels // groups if in_channels else 0
        with self.name_scope():
            offset_shape = (self._kwargs_offset["num_filter"], per_group, *kernel)

            def offsets() -> None:
                self.offset_weight = self.params.get("offset_weight", shape=offset_shape,
                                                     init=offset_weight_initializer, allow_deferred_init=True)
                self.offset_bias = self.params.get("offset_bias", shape=(offset_shape[0],),
                                                   init=offset_bias_initializer,
                                                   allow_deferred_init=True) if offset_use_bias else None

            def deformable() -> None:
                self.deformable_conv_weight = self.params.get("deformable_conv_weight",
                                                              shape=(channels, per_group, *kernel),
                                                              init=weight_initializer, allow_deferred_init=True)
                self.deformable_conv_bias = self.params.get("deformable_conv_bias", shape=(channels,),
                                                            init=bias_initializer,
                                                            allow_deferred_init=True) if use_bias else None

            # (MXNet 1.9.1 creates them in this order, which collect_params keeps)
            for make in ((deformable, offsets) if self._modulated else (offsets, deformable)):
                make()
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def hybrid_forward(self, F: Any, x: Any, offset_weight: Any, deformable_conv_weight: Any,
                       offset_bias: Any = None, deformable_conv_bias: Any = None) -> Any:
        offset_args = [x, offset_weight] + ([] if offset_bias is None else [offset_bias])
        offset = F.Convolution(*offset_args, cudnn_off=True, **self._kwargs_offset)
        weights = [deformable_conv_weight] + ([] if deformable_conv_bias is None else [deformable_conv_bias])
        if self._modulated:
            shift = F.slice_axis(offset, axis=1, begin=0, end=self._split)
            mask = F.sigmoid(F.slice_axis(offset, axis=1, begin=self._split, end=None)) * 2
            out = F.contrib.ModulatedDeformableConvolution(x, shift, mask, *weights, name="fwd",
                                                           **self._kwargs_deformable_conv)
        else:
            out = F.contrib.DeformableConvolution(x, offset, *weights, name="fwd", **self._kwargs_deformable_conv)
        return self.act(out) if self.act is not None else out


class DeformableConvolution(_Deformable):
    """2-D deformable convolution v1 (Dai et al., 2017) over NCHW data (MXNet's
    ``gluon.contrib.cnn.DeformableConvolution``).

    Parameters
    ----------
    channels : int
        Output channels.
    kernel_size, strides, padding, dilation : int or pair of int
        The convolution's geometry (shared by the offset convolution).
    groups : int
        Convolution groups.
    num_deformable_group : int
        Channel groups that share one set of offsets.
    use_bias, offset_use_bias : bool
        Whether the deformable and the offset convolutions have biases.
    in_channels : int
        Input channels (0: inferred from the first input).
    activation : str, optional
        An activation applied to the output.
    weight_initializer, bias_initializer, offset_weight_initializer, offset_bias_initializer
        Initializers (the offsets' default to zeros: a new layer samples the regular grid).
    """

    def _alias(self) -> str:
        return "deformable_conv"


class ModulatedDeformableConvolution(_Deformable):
    """2-D modulated deformable convolution v2 (Zhu et al., 2018): as
    :class:`DeformableConvolution`, each sample also scaled by a learned mask in (0, 2)."""

    _modulated = True

    def _alias(self) -> str:
        return "modulated_deformable_conv"
