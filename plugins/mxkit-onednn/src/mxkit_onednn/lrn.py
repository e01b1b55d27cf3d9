"""``LRN`` (local response normalisation across channels) and its gradient on oneDNN's LRN, in numpy's
layout: ``x / (knorm + alpha / nsize * sum of x**2 over the nsize channels around) ** beta``, the window
clipped at the first and last channel and the divisor ``nsize`` all the same, as in MXNet and oneDNN.

The normalisation runs per position, so data of any rank is viewed as (batch, channels, positions, 1).
oneDNN's gradient may want what its training forward keeps (a workspace of the normalisers): the
gradient program then runs that forward first, into the workspace, in chunks of samples that fit it.
oneDNN's fast (jit) LRN kernels each want one layout (numpy's own serves the forward with ``nsize=5``
on AVX2; the others want channels blocked by 8 (AVX2) or 16 (AVX-512), or channels last), so each
shape times the layouts (reordered in and out through the workspace) and keeps the fastest
(:meth:`mxkit_onednn.program.ProgramCache.run`), mxkit-cpu's kernel included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_onednn.conv import Outputs, apart, float32_arrays
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, Builder, Program, within_workspace

#: the parameters of ``LRN`` the kernels implement (all of them)
HANDLES = dict(alpha=ANY, beta=ANY, knorm=ANY, nsize=ANY)


def _dims(shape: tuple) -> tuple[int, int, int, int]:
    if len(shape) < 2:
        raise Unhandled
    return (int(shape[0]), int(shape[1]), int(np.prod(shape[2:], dtype=np.int64)), 1)


def _constants(params: dict) -> tuple:
    return (int(params["nsize"]), float(params["alpha"]), float(params["beta"]), float(params["knorm"]))


#: the layouts a program may run in: numpy's, or a oneDNN format tag (``aBcd8b``: channels blocked by 8)
LAYOUTS = {"plain": None, "blocked8": "aBcd8b", "blocked16": "aBcd16b", "channels_last": "acdb"}


def _md(dnnl: Any, dims: tuple, layout: str) -> Any:
    return dnnl.plain_md(dims) if LAYOUTS[layout] is None else dnnl.tagged_md(dims, LAYOUTS[layout])


def _forward_pd(dnnl: Any, dims: tuple, constants: tuple, prop_kind: int, layout: str = "plain") -> Any:
    md = _md(dnnl, dims, layout)
    return dnnl.lrn_forward_pd(prop_kind, md, md, *constants)


#: the layouts of the gradient's candidates: oneDNN 3.2 has no jit LRN gradient in numpy's layout (its
#: reference kernel there is several times slower than mxkit-cpu's)
BACKWARD_LAYOUTS = ("blocked8", "blocked16", "channels_last")


def _build_forward(dims: tuple, constants: tuple, layout: str) -> Program:
    dnnl = load()
    plain, md = dnnl.plain_md(dims), _md(dnnl, dims, layout)
    b = Builder(dnnl)
    src = b.operand(("in", 0), plain, md)
    dst = b.result(("out", 0), plain, md)
    b.step(_forward_pd(dnnl, dims, constants, dnnl.FORWARD_INFERENCE, layout),
           [(dnnl.ARG_SRC, md, src), (dnnl.ARG_DST, md, dst)])
    return b.build()


def _candidates(build: Any, dims: tuple, constants: tuple, layouts: Any) -> dict:
    """Per layout, a builder of its program (reordered copies in chunks of samples that fit the workspace)."""
    return {layout: lambda layout=layout: within_workspace(lambda n: build((n, *dims[1:]), constants, layout),
                                                           dims[0], batched=(0, 1))
            for layout in layouts}


@handles(**HANDLES)
def lrn(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``LRN``."""
    x, _ = float32_arrays([inputs[0], outputs[0]])
    apart(outputs, inputs)
    dims, constants = _dims(x.shape), _constants(params)
    out = Outputs([outputs[0]])
    PROGRAMS.run(("LRN", dims, constants), _candidates(_build_forward, dims, constants, LAYOUTS),
                 [x.reshape(dims)], [a.reshape(dims) for a in out.arrays], replaced)
    out.finish()


def _build_backward(dims: tuple, constants: tuple, layout: str) -> Program:
    """Inputs (out_grad, data); output the data gradient."""
    dnnl = load()
    plain, md = dnnl.plain_md(dims), _md(dnnl, dims, layout)
    forward = _forward_pd(dnnl, dims, constants, dnnl.FORWARD_TRAINING, layout)
    backward = dnnl.lrn_backward_pd(md, md, md, *constants, forward)
    b = Builder(dnnl)
    src = b.operand(("in", 1), plain, md)
    diff_dst = b.operand(("in", 0), plain, md)
    diff_src = b.result(("out", 0), plain, md)
    bindings = []
    workspace_md = forward.md("workspace")
    if workspace_md is not None and workspace_md.nbytes:  # the forward again, for what the gradient reads
        workspace = b.scratch(workspace_md)
        b.step(forward, [(dnnl.ARG_SRC, md, src), (dnnl.ARG_DST, md, b.scratch(md)),
                         (dnnl.ARG_WORKSPACE, workspace_md, workspace)])
        bindings.append((dnnl.ARG_WORKSPACE, workspace_md, workspace))
    b.step(backward, [(dnnl.ARG_SRC, md, src), (dnnl.ARG_DIFF_DST, md, diff_dst),
                      (dnnl.ARG_DIFF_SRC, md, diff_src), *bindings])
    return b.build()


@handles(**HANDLES)
def lrn_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_LRN``: inputs (out_grad, data), output the data gradient."""
    out_grad, x, _ = float32_arrays([inputs[0], inputs[1], outputs[0]])
    if out_grad.shape != x.shape:
        raise Unhandled
    apart(outputs, inputs)
    dims, constants = _dims(x.shape), _constants(params)
    out = Outputs([outputs[0]])
    # the forward it may rerun writes copies of the data into the workspace: the batch goes in chunks that fit
    # oneDNN 3.2's AVX-512 gradient in channels-last layout crashes when it builds a primitive of nsize 1
    layouts = [layout for layout in BACKWARD_LAYOUTS if not (layout == "channels_last" and constants[0] == 1)]
    PROGRAMS.run(("_backward_LRN", dims, constants), _candidates(_build_backward, dims, constants, layouts),
                 [out_grad.reshape(dims), x.reshape(dims)], [a.reshape(dims) for a in out.arrays], replaced)
    out.finish()


__all__ = ["BACKWARD_LAYOUTS", "HANDLES", "LAYOUTS", "lrn", "lrn_backward"]
