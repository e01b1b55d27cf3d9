"""``Pooling`` (max and average, 1-D to 3-D windows) and its gradient on oneDNN's pooling.

The geometry is mxkit's (valid or full convention, global pooling, padding): oneDNN gets the
padding before each axis and whatever padding after it makes its output size the one mxkit
inferred. Cases whose results would differ from MXNet's rules go to the replaced kernel:
``sum`` and ``lp`` pooling, average pooling counting the padding when the full convention's
last window overhangs the padded input (MXNet does not count the overhang, oneDNN would), and
windows that lie wholly in the padding. The gradient of max pooling needs the positions of
the maxima, which oneDNN keeps in a workspace that only its forward fills: the gradient
program runs the forward first, into the thread's workspace.

Unlike a convolution, oneDNN's pooling does not choose the layout of its input (a source of
format ``any`` is refused with ``dnnl_invalid_arguments``, status 2): the blocked programs name
it, channels blocked as oneDNN's convolutions block them on this CPU (16 on AVX-512, 8 on AVX2;
:func:`blocked_tag`). 1-D pooling runs as 2-D pooling one row high, as 1-D convolution does.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import Outputs, activation_md, float32_arrays
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, Builder, Program, refuse_over_workspace, within_workspace

#: the parameters of ``Pooling`` the kernels implement. Not: ``sum`` and ``lp`` pooling, and the ``same``
#: convention (its padding is split before and after the data, which this geometry does not express).
#: ``p_value`` is read by ``lp`` pooling alone; ``cudnn_off`` is a hint to MXNet's GPU kernels.
HANDLES = dict(kernel=ANY, pool_type=("max", "avg"), global_pool=ANY, pooling_convention=("valid", "full"),
               stride=ANY, pad=ANY, count_include_pad=ANY, p_value=ANY, cudnn_off=ANY,
               layout=(None, "NCW", "NCHW", "NCDHW"))


class PoolGeometry:
    """One pooling call in oneDNN's terms."""

    def __init__(self, params: dict, data_shape: tuple, out_shape: tuple) -> None:
        pool_type = params["pool_type"]
        nd = len(data_shape) - 2
        if pool_type not in ("max", "avg") or not 1 <= nd <= 3:
            raise Unhandled
        spatial = tuple(int(d) for d in data_shape[2:])
        if params["global_pool"]:
            kernel, stride, pad = spatial, (1,) * nd, (0,) * nd
        else:
            kernel = tuple(int(k) for k in params["kernel"])
            stride = _mxkit.spatial_tuple("Pooling", "stride", params["stride"], nd, 1)
            pad = _mxkit.spatial_tuple("Pooling", "pad", params["pad"], nd, 0)
        out = tuple(int(d) for d in out_shape[2:])
        if nd == 1:  # one row high: the blocked layouts are of 4-D arrays
            kernel, stride, pad, spatial, out = (1, *kernel), (1, *stride), (0, *pad), (1, *spatial), (1, *out)
            data_shape, out_shape = (*data_shape[:2], *spatial), (*out_shape[:2], *out)
        reach = tuple((o - 1) * s + k - i - p for o, s, k, i, p in zip(out, stride, kernel, spatial, pad))
        include_pad = params["count_include_pad"] is not False
        if any(p >= k for p, k in zip(pad, kernel)) or any((o - 1) * s - p >= i for o, s, p, i in
                                                             zip(out, stride, pad, spatial)):
            raise Unhandled  # a window wholly in the padding
        if pool_type == "avg" and include_pad and any(r > p for r, p in zip(reach, pad)):
            raise Unhandled  # the full convention's overhang, which MXNet leaves out of the divisor
        self.algorithm = ("max" if pool_type == "max" else "avg_include" if include_pad else "avg_exclude")
        self.src = tuple(int(d) for d in data_shape)
        self.dst = tuple(int(d) for d in out_shape)
        self.kernel, self.strides, self.pad_l = kernel, stride, pad
        self.pad_r = tuple(max(0, r) for r in reach)

    def with_batch(self, batch: int) -> PoolGeometry:
        """This geometry for ``batch`` samples (a chunk of the batch)."""
        chunk = copy.copy(self)
        chunk.src, chunk.dst = (batch, *self.src[1:]), (batch, *self.dst[1:])
        return chunk

    def key(self) -> tuple:
        return (self.algorithm, self.src, self.dst, self.kernel, self.strides, self.pad_l, self.pad_r)

    def alg(self, dnnl: Any) -> int:
        return {"max": dnnl.POOLING_MAX, "avg_include": dnnl.POOLING_AVG_INCLUDE_PADDING,
                "avg_exclude": dnnl.POOLING_AVG_EXCLUDE_PADDING}[self.algorithm]


@functools.cache
def blocked_tag() -> str:
    """The oneDNN format tag of channels blocked as its convolutions block them on this CPU (``aBcd16b`` on
    AVX-512, ``aBcd8b`` on AVX2): the layout its jit pooling kernels run in."""
    dnnl = load()
    dims = (1, 64, 8, 8)
    pd = dnnl.convolution_forward_pd(dnnl.FORWARD_INFERENCE, dnnl.any_md(dims), dnnl.any_md((64, 64, 3, 3)), None,
                                     dnnl.any_md(dims), (1, 1), (0, 0), (1, 1), (1, 1))
    return "aBcd16b" if pd.md("src").same_as(dnnl.tagged_md(dims, "aBcd16b")) else "aBcd8b"


def pooling_md(dnnl: Any, dims: tuple, layout: str) -> Any:
    """The layout of a pooling's activations: numpy's (``plain``) or channels blocked (``blocked``; 4-D only)."""
    if layout == "plain":
        return dnnl.plain_md(dims)
    if len(dims) != 4:
        raise RuntimeError(f"no blocked layout of {len(dims)}-D pooling data here")  # a refused candidate
    return dnnl.tagged_md(dims, blocked_tag())


def _forward_pd(dnnl: Any, g: PoolGeometry, prop_kind: int, layout: str) -> Any:
    # the source's layout named (pooling takes no ``any`` there), the result's chosen to match it
    return dnnl.pooling_forward_pd(prop_kind, g.alg(dnnl), pooling_md(dnnl, g.src, layout),
                                   activation_md(dnnl, g.dst, layout), g.strides, g.kernel, g.pad_l, g.pad_r)


def _build_forward(g: PoolGeometry, layout: str) -> Program:
    dnnl = load()
    pd = _forward_pd(dnnl, g, dnnl.FORWARD_INFERENCE, layout)
    b = Builder(dnnl)
    src_md, dst_md = pd.md("src"), pd.md("dst")
    src = b.operand(("in", 0), dnnl.plain_md(g.src), src_md)
    dst = b.result(("out", 0), dnnl.plain_md(g.dst), dst_md)
    b.step(pd, [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DST, dst_md, dst)])
    return b.build()


@handles(**HANDLES)
def pooling(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Pooling``."""
    arrays = float32_arrays([inputs[0], outputs[0]])
    g = PoolGeometry(params, arrays[0].shape, outputs[0].shape)
    out = Outputs([outputs[0]])
    builders = {"blocked": lambda: within_workspace(lambda n: _build_forward(g.with_batch(n), "blocked"), g.src[0],
                                                    batched=(0,)),
                "plain": lambda: _build_forward(g, "plain")}
    PROGRAMS.run(("Pooling", *g.key()), builders, [arrays[0]], out.arrays, replaced)
    out.finish()


def _build_backward(g: PoolGeometry, layout: str) -> Program:
    """Inputs (out_grad, data); output (data grad)."""
    dnnl = load()
    forward = _forward_pd(dnnl, g, dnnl.FORWARD_TRAINING, layout)
    backward = dnnl.pooling_backward_pd(g.alg(dnnl), pooling_md(dnnl, g.src, layout), forward.md("dst"), g.strides,
                                        g.kernel, g.pad_l, g.pad_r,
                                        forward)
    b = Builder(dnnl)
    bindings = []
    if g.algorithm == "max":  # the forward again, for the positions of the maxima
        src_md, dst_md, workspace_md = forward.md("src"), forward.md("dst"), forward.md("workspace")
        src = b.operand(("in", 1), dnnl.plain_md(g.src), src_md)
        workspace = b.scratch(workspace_md)
        b.step(forward, [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DST, dst_md, b.scratch(dst_md)),
                         (dnnl.ARG_WORKSPACE, workspace_md, workspace)])
        bindings.append((dnnl.ARG_WORKSPACE, workspace_md, workspace))
    diff_dst_md, diff_src_md = backward.md("diff_dst"), backward.md("diff_src")
    diff_dst = b.operand(("in", 0), dnnl.plain_md(g.dst), diff_dst_md)
    diff_src = b.result(("out", 0), dnnl.plain_md(g.src), diff_src_md)
    b.step(backward, [(dnnl.ARG_DIFF_DST, diff_dst_md, diff_dst), (dnnl.ARG_DIFF_SRC, diff_src_md, diff_src),
                      *bindings])
    return b.build()


@handles(**HANDLES)
def pooling_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_Pooling``: inputs (out_grad, data, output), output the data gradient."""
    arrays = float32_arrays([inputs[0], inputs[1], outputs[0]])
    out_grad, data = arrays[:2]
    g = PoolGeometry(params, data.shape, out_grad.shape)
    out = Outputs([outputs[0]])
    builders = {"blocked": lambda: refuse_over_workspace(_build_backward(g, "blocked")),
                # max pooling's gradient reruns the forward into the workspace: bounded like the blocked copies
                "plain": lambda: refuse_over_workspace(_build_backward(g, "plain"))}
    PROGRAMS.run(("_backward_Pooling", *g.key()), builders, [out_grad, data], out.arrays,
                 None if replaced is None else lambda ins, outs: replaced([*ins, inputs[2]], outs))
    out.finish()


__all__ = ["HANDLES", "PoolGeometry", "pooling", "pooling_backward"]
