"""``add_n`` (``ElementWiseSum``) and ``Concat`` on oneDNN's sum and concat primitives, in numpy's layout.

Both write their output once, in place, on oneDNN's threads; the generic kernels they replace (mxkit-cpu
has none of its own) build the result in a temporary and copy it out. The sum views every array as one
flat row (its inputs all have the output's shape) and adds them in input order, as the generic kernel
does. The concatenation views each array as (before the axis, along it, after it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import Outputs, float32_arrays
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, Builder, Program


def _written_safely(output: np.ndarray, others: list, first: np.ndarray | None = None) -> bool:
    """Whether ``output`` overlaps none of ``others``, and is ``first`` exactly or overlaps it not at all."""
    if any(np.may_share_memory(output, other) for other in others):
        return False
    return first is None or not np.may_share_memory(output, first) or (
        output.ctypes.data == first.ctypes.data and output.strides == first.strides)


def _build_sum(size: int, count: int) -> Program:
    dnnl = load()
    flat = dnnl.plain_md((size,))
    b = Builder(dnnl)
    pd = dnnl.sum_pd(flat, [flat] * count)
    b.step(pd, [*((dnnl.ARG_MULTIPLE_SRC + i, flat, ("in", i)) for i in range(count)),
                (dnnl.ARG_DST, flat, ("out", 0))])
    return b.build()


@handles(num_args=ANY)
def add_n(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``add_n``."""
    arrays = float32_arrays([*inputs, outputs[0]])
    if any(a.shape != arrays[-1].shape for a in arrays):
        raise Unhandled  # broadcasting is the generic kernel's business
    # oneDNN's sum writes the first input's terms into the output before it reads the others: an output that is
    # the first input is fine, one that overlaps another input (``out=`` of the imperative call) is not
    if not _written_safely(arrays[-1], arrays[1:-1], first=arrays[0]):
        raise Unhandled
    size, count = arrays[-1].size, len(inputs)
    out = Outputs([outputs[0]])
    PROGRAMS.run(("add_n", size, count), {"plain": lambda: _build_sum(size, count)},
                 [a.reshape(-1) for a in arrays[:-1]], [a.reshape(-1) for a in out.arrays],
                 None if replaced is None else
                 lambda ins, outs: replaced([i.reshape(outputs[0].shape) for i in ins],
                                            [o.reshape(outputs[0].shape) for o in outs]))
    out.finish()


def _view(shape: tuple, axis: int) -> tuple[int, int, int]:
    return (int(np.prod(shape[:axis], dtype=np.int64)), int(shape[axis]), int(np.prod(shape[axis + 1:],
                                                                                    dtype=np.int64)))


def _build_concat(views: tuple, out_view: tuple) -> Program:
    dnnl = load()
    sources = [dnnl.plain_md(view) for view in views]
    dst = dnnl.plain_md(out_view)
    b = Builder(dnnl)
    b.step(dnnl.concat_pd(dst, 1, sources),
           [*((dnnl.ARG_MULTIPLE_SRC + i, md, ("in", i)) for i, md in enumerate(sources)),
            (dnnl.ARG_DST, dst, ("out", 0))])
    return b.build()


@handles(num_args=ANY, dim=ANY)
def concat(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Concat``."""
    arrays = float32_arrays([*inputs, outputs[0]])
    if not _written_safely(arrays[-1], arrays[:-1]):
        raise Unhandled  # an output overlapping an input: the generic kernel copies through a temporary
    axis = _mxkit.normalize_axis(params["dim"], arrays[-1].ndim, "Concat")
    views = tuple(_view(a.shape, axis) for a in arrays[:-1])
    out_view = _view(arrays[-1].shape, axis)
    out = Outputs([outputs[0]])
    PROGRAMS.run(("Concat", views, out_view), {"plain": lambda: _build_concat(views, out_view)},
                 [a.reshape(v) for a, v in zip(arrays[:-1], views)], [a.reshape(out_view) for a in out.arrays],
                 None if replaced is None else
                 lambda ins, outs: replaced([i.reshape(a.shape) for i, a in zip(ins, arrays)],
                                            [o.reshape(outputs[0].shape) for o in outs]))
    out.finish()


__all__ = ["add_n", "concat"]
