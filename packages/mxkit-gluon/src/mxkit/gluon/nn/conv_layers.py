"""Convolution and pooling layers (MXNet 1.9.1's ``nn.Conv2D``, ``nn.MaxPool2D``...)."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock
from mxkit.gluon.nn.activations import Activation
from mxkit.gluon.parameter import GluonError


def _tuple(value: Any, count: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * count
    value = tuple(int(v) for v in value)
    if len(value) != count:
        raise GluonError(f"{what} must be an int or a tuple of {count} ints, got {value}")
    return value


class _Conv(HybridBlock):
    """The convolutions and transposed convolutions of every dimension."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any, padding: Any, dilation: Any, groups: int,
                 layout: str, in_channels: int = 0, activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", op_name: str = "Convolution",
                 adj: Any = None, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        dims = len(layout) - 2
        kernel_size = _tuple(kernel_size, dims, "kernel_size")
        with self.name_scope():
            self._channels = channels
            self._in_channels = in_channels
            self._op_name = op_name
            self._kwargs: dict[str, Any] = {
                "kernel": kernel_size, "stride": _tuple(strides, dims, "strides"),
                "dilate": _tuple(dilation, dims, "dilation"), "pad": _tuple(padding, dims, "padding"),
                "num_filter": channels, "num_group": groups, "no_bias": not use_bias, "layout": layout}
            if adj is not None:
                self._kwargs["adj"] = _tuple(adj, dims, "output_padding")
            if op_name == "Convolution":
                wshape = (channels, in_channels // groups if in_channels else 0, *kernel_size)
            else:
                wshape = (in_channels, channels // groups, *kernel_size)
            self.weight = self.params.get("weight", shape=wshape, init=weight_initializer, allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer,
                                        allow_deferred_init=True) if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation is not None else None

    def _alias(self) -> str:
        return "conv"

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:
        op = getattr(F, self._op_name)
        out = op(x, weight, name="fwd", **self._kwargs) if bias is None else op(x, weight, bias, name="fwd",
                                                                                 **self._kwargs)
        return self.act(out) if self.act is not None else out


class Conv1D(_Conv):
    """1-D convolution over ``NCW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, layout: str = "NCW", activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, **kwargs)


class Conv2D(_Conv):
    """2-D convolution over ``NCHW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1), padding: Any = (0, 0),
                 dilation: Any = (1, 1), groups: int = 1, layout: str = "NCHW", activation: str | None = None,
                 use_bias: bool = True, weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, **kwargs)


class Conv3D(_Conv):
    """3-D convolution over ``NCDHW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0),
                 dilation: Any = (1, 1, 1), groups: int = 1, layout: str = "NCDHW", activation: str | None = None,
                 use_bias: bool = True, weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, **kwargs)


class Conv2DTranspose(_Conv):
    """2-D transposed convolution (``Deconvolution``) over ``NCHW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1), padding: Any = (0, 0),
                 output_padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1, layout: str = "NCHW",
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, op_name="Deconvolution",
                         adj=output_padding, **kwargs)
        self.outpad = output_padding


class Conv1DTranspose(_Conv):
    """1-D transposed convolution over ``NCW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0, output_padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, layout: str = "NCW", activation: str | None = None,
                 use_bias: bool = True, weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, op_name="Deconvolution",
                         adj=output_padding, **kwargs)
        self.outpad = output_padding


class Conv3DTranspose(_Conv):
    """3-D transposed convolution over ``NCDHW`` inputs."""

    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1, 1), padding: Any = (0, 0, 0),
                 output_padding: Any = (0, 0, 0), dilation: Any = (1, 1, 1), groups: int = 1, layout: str = "NCDHW",
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer, op_name="Deconvolution",
                         adj=output_padding, **kwargs)
        self.outpad = output_padding


class ReflectionPad2D(HybridBlock):
    """Pad the two spatial axes of ``NCHW`` inputs by reflection (``padding`` on every side, or
    MXNet's 8-tuple ``pad_width``)."""

    def __init__(self, padding: Any = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(padding, int):
            padding = (0, 0, 0, 0, padding, padding, padding, padding)
        padding = tuple(int(p) for p in padding)
        if len(padding) != 8:
            raise GluonError(f"ReflectionPad2D: padding must be an int or 8 ints (MXNet's pad_width), got {padding}")
        self._padding = padding

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.pad(x, mode="reflect", pad_width=self._padding)


class _Pooling(HybridBlock):
    def __init__(self, pool_size: Any, strides: Any, padding: Any, ceil_mode: bool, global_pool: bool,
                 pool_type: str, layout: str, count_include_pad: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        dims = len(layout) - 2
        pool_size = _tuple(pool_size, dims, "pool_size")
        strides = pool_size if strides is None else _tuple(strides, dims, "strides")
        channels_first = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[dims]
        channels_last = {1: "NWC", 2: "NHWC", 3: "NDHWC"}[dims]
        if layout not in (channels_first, channels_last):
            raise GluonError(f"{type(self).__name__}: layout must be {channels_first!r} or {channels_last!r}, "
                             f"got {layout!r}")
        # the Pooling operator pools channel-first data: channel-last input is transposed
        # around it (a copy each way), which gives MXNet's results and gradients for NWC/NHWC/NDHWC
        self._channels_last = layout == channels_last
        self._dims = dims
        self._kwargs: dict[str, Any] = {
            "kernel": pool_size, "stride": strides, "pad": _tuple(padding, dims, "padding"),
            "global_pool": global_pool, "pool_type": pool_type, "layout": channels_first,
            "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self) -> str:
        return "pool"

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        if not self._channels_last:
            return F.Pooling(x, name="fwd", **self._kwargs)
        spatial = tuple(range(1, self._dims + 1))
        x = F.transpose(x, axes=(0, self._dims + 1, *spatial))
        pooled = F.Pooling(x, **self._kwargs)
        return F.transpose(pooled, axes=(0, *(a + 1 for a in spatial), 1), name="fwd")


def _check_pool_layout(name: str, layout: Any, dims: int) -> None:
    allowed = ({1: "NCW", 2: "NCHW", 3: "NCDHW"}[dims], {1: "NWC", 2: "NHWC", 3: "NDHWC"}[dims])
    if layout not in allowed:
        raise GluonError(f"{name}: layout must be {allowed[0]!r} or {allowed[1]!r}, got {layout!r}")


def _pool_class(name: str, pool_type: str, layout: str, default_size: Any, doc: str) -> type:
    dims = len(layout) - 2

    def __init__(self: Any, pool_size: Any = default_size, strides: Any = None, padding: Any = 0,
                 layout: str = layout, ceil_mode: bool = False, count_include_pad: bool = True,
                 **kwargs: Any) -> None:
        _check_pool_layout(name, layout, dims)
        _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, pool_type, layout,
                          count_include_pad if pool_type == "avg" else None, **kwargs)

    cls = type(name, (_Pooling,), {"__init__": __init__, "__doc__": doc})
    cls.__module__ = __name__
    return cls


def _global_pool_class(name: str, pool_type: str, layout: str, doc: str) -> type:
    dims = len(layout) - 2

    def __init__(self: Any, layout: str = layout, **kwargs: Any) -> None:
        _check_pool_layout(name, layout, dims)
        _Pooling.__init__(self, (1,) * dims, None, 0, True, True, pool_type, layout, **kwargs)

    cls = type(name, (_Pooling,), {"__init__": __init__, "__doc__": doc})
    cls.__module__ = __name__
    return cls


MaxPool1D = _pool_class("MaxPool1D", "max", "NCW", 2, "1-D max pooling.")
MaxPool2D = _pool_class("MaxPool2D", "max", "NCHW", (2, 2), "2-D max pooling.")
MaxPool3D = _pool_class("MaxPool3D", "max", "NCDHW", (2, 2, 2), "3-D max pooling.")
AvgPool1D = _pool_class("AvgPool1D", "avg", "NCW", 2, "1-D average pooling.")
AvgPool2D = _pool_class("AvgPool2D", "avg", "NCHW", (2, 2), "2-D average pooling.")
AvgPool3D = _pool_class("AvgPool3D", "avg", "NCDHW", (2, 2, 2), "3-D average pooling.")
GlobalMaxPool1D = _global_pool_class("GlobalMaxPool1D", "max", "NCW", "Global 1-D max pooling.")
GlobalMaxPool2D = _global_pool_class("GlobalMaxPool2D", "max", "NCHW", "Global 2-D max pooling.")
GlobalMaxPool3D = _global_pool_class("GlobalMaxPool3D", "max", "NCDHW", "Global 3-D max pooling.")
GlobalAvgPool1D = _global_pool_class("GlobalAvgPool1D", "avg", "NCW", "Global 1-D average pooling.")
GlobalAvgPool2D = _global_pool_class("GlobalAvgPool2D", "avg", "NCHW", "Global 2-D average pooling.")
GlobalAvgPool3D = _global_pool_class("GlobalAvgPool3D", "avg", "NCDHW", "Global 3-D average pooling.")
