"""Max, average and sum ``Pooling`` (1-D and 2-D, float32 and float64) on the Cython loops of ``_pool``.

The generic kernel (``mxkit.ndarray.ops.nn_pool``) pads the input and takes one strided
slice per kernel offset, which allocates a padded copy and, for the gradient of max pooling,
a mask per offset. These loops visit each window once, without the GIL, split across threads
by blocks of samples. The window geometry (conventions, global pooling, validation) is the
generic operator's own; lp pooling, 3-D windows and other dtypes go to the generic kernel.
"""

from __future__ import annotations

from typing import Any

from mxkit_cpu import _pool
from mxkit_cpu.conv import OutputGrid, as_4d, generic_kernel, handled
from mxkit_cpu.parallel import plan_blocks, run_blocks

_HANDLED_TYPES = ("max", "avg", "sum")


def _window(g: Any) -> tuple[int, ...]:
    """``(kh, kw, stride_h, stride_w, pad_h, pad_w)``; a 1-D window is 1 high."""
    if len(g.kernel) == 1:
        return (1, g.kernel[0], 1, g.stride[0], 0, g.pad[0])
    return (g.kernel[0], g.kernel[1], g.stride[0], g.stride[1], g.pad[0], g.pad[1])


def _geometry(params: dict, shape) -> Any:
    from mxkit.ndarray.kernels import PoolGeometry  # inside: see mxkit_cpu.conv

    return PoolGeometry(params, shape)


def _include_pad(params: dict) -> bool:
    return params["count_include_pad"] is not False


def pooling(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``Pooling``."""
    data = inputs[0]
    g = _geometry(params, data.shape)
    if params["pool_type"] not in _HANDLED_TYPES or not handled([data, outputs[0]], g.kernel):
        generic_kernel("Pooling", xp, inputs, outputs, params)
        return
    window = _window(g)
    data4 = as_4d(data)
    result = OutputGrid(outputs[0])
    pool_type, include_pad = params["pool_type"], _include_pad(params)

    def block(index: int, n0: int, n1: int) -> None:
        _pool.pool_forward(data4, result.array, n0, n1, pool_type, *window, include_pad)

    run_blocks(block, plan_blocks(data.shape[0], outputs[0].size * window[0] * window[1]))
    result.finish()


def pooling_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``_backward_Pooling``: the window gradients added back onto the input."""
    out_grad, data, output = inputs
    g = _geometry(params, data.shape)
    if params["pool_type"] not in _HANDLED_TYPES or not handled([out_grad, data, output, outputs[0]], g.kernel):
        generic_kernel("_backward_Pooling", xp, inputs, outputs, params)
        return
    window = _window(g)
    grad4, data4, output4 = as_4d(out_grad), as_4d(data), as_4d(output)
    result = OutputGrid(outputs[0])
    pool_type, include_pad = params["pool_type"], _include_pad(params)

    def block(index: int, n0: int, n1: int) -> None:
        _pool.pool_backward(grad4, data4, output4, result.array, n0, n1, pool_type, *window, include_pad)

    run_blocks(block, plan_blocks(data.shape[0], output.size * window[0] * window[1] + data.size))
    result.finish()


#: operator name -> kernel
KERNELS = {"Pooling": pooling, "_backward_Pooling": pooling_backward}

__all__ = ["KERNELS", "pooling", "pooling_backward"]
