"""``Convolution`` forward, data gradient and weight gradient on oneDNN's direct convolution.

1-D convolutions run as 2-D ones one row high. Each shape runs whichever of three ways its
first call timed fastest (see :meth:`mxkit_onednn.program.ProgramCache.run`): the mxkit-cpu
kernel it replaced, oneDNN with activations in the layout it chooses (channels blocked by 16
on AVX-512), reordered in and out through the thread's workspace, or oneDNN in numpy's layout. The
filters are reordered on every call: they change every training step, and without a way to
know that they did not (prediction) a cached copy could be stale; the reorder reads the
filters once, a small cost next to the convolution, which reads them once per output pixel.
A forward run in chunks of samples reorders them once for all its chunks
(:class:`mxkit_onednn.program.Prepared`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from mxkit_onednn import _mxkit
from mxkit_onednn import program as program_module
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import (
    PROGRAMS,
    Builder,
    Chunked,
    Prepared,
    Program,
    pack_workspace,
    within_workspace,
    within_workspace_summed,
)

FLOAT32 = np.dtype(np.float32)


class ConvGeometry:
    """One convolution call in oneDNN's terms (2-D, dilation counted as gaps)."""

    #: the oneDNN primitive (``convolution`` or ``deconvolution``: :class:`mxkit_onednn.deconv.DeconvGeometry`)
    kind = "convolution"

    def __init__(self, params: dict, data_shape: tuple, weight_shape: tuple, out_shape: tuple) -> None:
        kernel = tuple(params["kernel"])
        if len(kernel) not in (1, 2) or len(data_shape) != len(kernel) + 2:
            raise Unhandled
        nd = len(kernel)
        stride = _mxkit.spatial_tuple("Convolution", "stride", params["stride"], nd, 1)
        dilate = _mxkit.spatial_tuple("Convolution", "dilate", params["dilate"], nd, 1)
        pad = _mxkit.spatial_tuple("Convolution", "pad", params["pad"], nd, 0)
        if nd == 1:  # one row high
            kernel, stride, dilate, pad = (1, *kernel), (1, *stride), (1, *dilate), (0, *pad)
            data_shape, out_shape = (*data_shape[:2], 1, data_shape[2]), (*out_shape[:2], 1, out_shape[2])
        self.groups = int(params["num_group"])
        self.src = tuple(int(d) for d in data_shape)
        self.dst = tuple(int(d) for d in out_shape)
        filters, per_group = int(weight_shape[0]), int(weight_shape[1])
        if self.groups == 1:
            self.weights = (filters, per_group, *kernel)
        else:
            self.weights = (self.groups, filters // self.groups, per_group, *kernel)
        self.bias = None if params["no_bias"] else (filters,)
        self.strides = stride
        self.dilates = tuple(d - 1 for d in dilate)
        self.pad_l = pad
        # the far padding that makes oneDNN's output size the one mxkit inferred (never negative)
        self.pad_r = tuple(max(0, (o - 1) * s + (k - 1) * d + 1 - i - p)
                           for o, s, k, d, i, p in zip(self.dst[2:], stride, kernel, dilate, self.src[2:], pad))

    def with_batch(self, batch: int) -> ConvGeometry:
        """This geometry for ``batch`` samples (a chunk of the batch)."""
        chunk = copy.copy(self)
        chunk.src, chunk.dst = (batch, *self.src[1:]), (batch, *self.dst[1:])
        return chunk

    def key(self) -> tuple:
        return (self.src, self.weights, self.bias, self.dst, self.strides, self.dilates, self.pad_l, self.pad_r)

    def weights_md(self, dnnl: Any) -> Any:
        """The layout of the weights as mxkit holds them (row-major (groups,) filters, channels, window)."""
        return dnnl.plain_md(self.weights)


#: the parameters of ``Convolution`` the kernels implement: the geometry, and MXNet's hints to its GPU kernels and
#: its temporary buffers (``workspace``, ``cudnn_*``), which change how a result is computed, not the result
HANDLES = dict(kernel=ANY, stride=ANY, dilate=ANY, pad=ANY, num_filter=ANY, num_group=ANY, no_bias=ANY,
               workspace=ANY, cudnn_tune=ANY, cudnn_off=ANY, layout=(None, "NCW", "NCHW"))


def float32_arrays(arrays: list) -> list[np.ndarray]:
    """The arrays as C-contiguous float32 numpy arrays, or :class:`Unhandled`."""
    if any(not isinstance(a, np.ndarray) or a.dtype != FLOAT32 or a.size == 0 for a in arrays):
        raise Unhandled
    return [np.ascontiguousarray(a) for a in arrays]


def apart(outputs: list, inputs: list) -> None:
    """:class:`Unhandled` when an output overlaps an input (``out=`` an input of an imperative call): oneDNN's
    primitives read their inputs while they write, the generic kernels through temporaries."""
    if any(np.may_share_memory(o, i) for o in outputs for i in inputs):
        raise Unhandled


class Outputs:
    """The outputs as C-contiguous arrays to write into (temporaries copied back for the others)."""

    def __init__(self, outputs: list) -> None:
        self.targets = outputs
        self.arrays = [o if o.flags.c_contiguous else np.empty(o.shape, o.dtype) for o in outputs]

    def finish(self) -> None:
        for target, array in zip(self.targets, self.arrays):
            if array is not target:
                np.copyto(target, array)

    def finish_if_needed(self) -> Callable[[], None] | None:
        """:meth:`finish`, or None when every output is written in place (nothing to copy back)."""
        return self.finish if any(array is not target for target, array in zip(self.targets, self.arrays)) else None


#: the two ways to run a convolution: activations in the layout oneDNN chooses (blocked channels, reordered
#: in and out through the workspace), or in numpy's own layout (no reorder; oneDNN then mostly uses its
#: im2col + GEMM kernels). Which is faster depends on the shape and the pass; the first call of each
#: shape times both and keeps the faster (:func:`mxkit_onednn.program.fastest`).
LAYOUTS = ("blocked", "plain")


def activation_md(dnnl: Any, dims: tuple, layout: str) -> Any:
    return dnnl.plain_md(dims) if layout == "plain" else dnnl.any_md(dims)


def _forward_pd(dnnl: Any, g: ConvGeometry, prop_kind: int, layout: str, post_ops: tuple = ()) -> Any:
    extra = {"post_ops": post_ops} if post_ops else {}
    return getattr(dnnl, f"{g.kind}_forward_pd")(
        prop_kind, activation_md(dnnl, g.src, layout), dnnl.any_md(g.weights),
        None if g.bias is None else dnnl.plain_md(g.bias), activation_md(dnnl, g.dst, layout), g.strides, g.dilates,
        g.pad_l, g.pad_r, **extra)


def build_forward(g: ConvGeometry, layout: str, relu: bool = False, add: bool = False,
                  addend_is_output: bool = False, weights_given: bool = False) -> Program:
    """Inputs (data, weight[, bias][, addend]); output the result, ``relu(conv + addend)`` with ``add`` and
    ``relu`` (oneDNN's post-ops: applied to each block of the result before it is written). With
    ``addend_is_output`` (the planner gave them one storage) the addend is copied into the workspace first and
    the result written through a workspace slot, so the primitive never reads what it is writing. With
    ``weights_given`` the weight input is already in the layout the primitive chose (``program.weights_md``)."""
    dnnl = load()
    pd = _forward_pd(dnnl, g, dnnl.FORWARD_INFERENCE, layout)
    if add or relu:
        # the addend is read in the layout the result is written in: the one chosen without post-ops
        dst_md = pd.md("dst")
        post_ops = ((("add", dst_md),) if add else ()) + ((("relu",),) if relu else ())
        pd = _forward_pd(dnnl, g, dnnl.FORWARD_INFERENCE, layout, post_ops)
        if not pd.md("dst").same_as(dst_md):
            raise RuntimeError("with post-ops oneDNN chose another layout for the result")
        if pd.implementation.startswith("ref"):  # gemm convolutions take no binary post-op: oneDNN's reference loop
            raise RuntimeError(f"with post-ops oneDNN offers only its reference convolution ({pd.implementation})")
    b = Builder(dnnl)
    src_md, weights_md, dst_md = pd.md("src"), pd.md("weights"), pd.md("dst")
    src = b.operand(("in", 0), dnnl.plain_md(g.src), src_md)
    weights = ("in", 1) if weights_given else b.operand(("in", 1), g.weights_md(dnnl), weights_md)
    bindings = [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_WEIGHTS, weights_md, weights)]
    if g.bias is not None:
        bindings.append((dnnl.ARG_BIAS, dnnl.plain_md(g.bias), ("in", 2)))
    plain_dst = dnnl.plain_md(g.dst)
    if add:
        addend_ref = ("in", 2 if g.bias is None else 3)
        if addend_is_output and dst_md.same_as(plain_dst):  # a copy, not the output itself
            addend = b.program.slot(dst_md.nbytes)
            b.program.add(dnnl.Primitive(dnnl.reorder_pd(plain_dst, dst_md),
                                         [(dnnl.ARG_SRC, plain_dst), (dnnl.ARG_DST, dst_md)]), [addend_ref, addend])
        else:
            addend = b.operand(addend_ref, plain_dst, dst_md)
        bindings.append((dnnl.ARG_POST_OP_SRC_1(0), dst_md, addend))
    dst = b.result(("out", 0), plain_dst, dst_md)
    b.step(pd, [*bindings, (dnnl.ARG_DST, dst_md, dst)])
    program = b.build()
    program.weights_md = weights_md  # type: ignore[attr-defined]
    return program


def build_blocked_forward(g: ConvGeometry, batched: tuple[int, ...], **options: Any) -> Program | Chunked | Prepared:
    """The forward in the blocked layout (``options``: :func:`build_forward`'s post-ops), whole or, when its
    workspace would pass :data:`~mxkit_onednn.program.WORKSPACE_BYTES`, in chunks of samples that reorder the
    filters once per call (:class:`Prepared`) where every chunk's primitive wants them in one layout."""
    dnnl = load()
    whole = within_workspace(lambda n: build_forward(g.with_batch(n), "blocked", **options), g.src[0], batched)
    if not isinstance(whole, Chunked):
        return whole
    plain_weights, budget = g.weights_md(dnnl), program_module.WORKSPACE_BYTES
    chosen = whole.programs[min(whole.per_chunk, whole.batch)].weights_md
    if chosen.same_as(plain_weights) or chosen.nbytes >= budget // 2 or not all(
            program.weights_md.same_as(chosen) for program in whole.programs.values()):
        return whole
    # the chunks again, sized for what the reordered filters leave of the workspace
    chunked = within_workspace(lambda n: build_forward(g.with_batch(n), "blocked", weights_given=True, **options),
                               g.src[0], batched, budget=budget - program_module.aligned(chosen.nbytes))
    if not isinstance(chunked, Chunked) or not all(program.weights_md.same_as(chosen)
                                                   for program in chunked.programs.values()):
        return whole
    prologue = Builder(dnnl)
    prologue.step(dnnl.reorder_pd(plain_weights, chosen), [(dnnl.ARG_SRC, plain_weights, ("in", 0)),
                                                            (dnnl.ARG_DST, chosen, ("out", 0))])
    return Prepared(prologue.build(), chunked, index=1)


@handles(**HANDLES)
def convolution(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Convolution``."""
    arrays = float32_arrays([*inputs[:2 if params["no_bias"] else 3], outputs[0]])
    run_forward("Convolution", ConvGeometry(params, arrays[0].shape, arrays[1].shape, outputs[0].shape), arrays,
                outputs, replaced)


def run_forward(name: str, g: ConvGeometry, arrays: list, outputs: list, replaced: Any) -> None:
    """Operator ``name``'s forward of geometry ``g`` on ``arrays`` (data, weight[, bias], result)."""
    out = Outputs([outputs[0]])
    # the blocked layout's reordered copies of the activations go in chunks of samples that fit the workspace
    builders = {"blocked": lambda: build_blocked_forward(g, batched=(0,)),
                "plain": lambda: build_forward(g, "plain")}
    PROGRAMS.run((name, *g.key()), builders, arrays[:-1], out.arrays, replaced)
    out.finish()


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are views of the same memory with the same layout (not merely overlapping)."""
    return a.ctypes.data == b.ctypes.data and a.shape == b.shape and a.strides == b.strides


#: the parameters of ``_FusedConvolution`` the kernel implements: Convolution's, the relu and the addition
FUSED_HANDLES = dict(HANDLES, act_type=(None, "relu"), with_sum=ANY)


@handles(**FUSED_HANDLES)
def fused_convolution(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``_FusedConvolution``: ``relu(conv + addend)`` (each part as the parameters ask) in one
    oneDNN primitive with post-ops."""
    conv_inputs = 2 if params["no_bias"] else 3
    add, relu = bool(params["with_sum"]), params["act_type"] == "relu"
    arrays = float32_arrays([*inputs[:conv_inputs + add], outputs[0]])
    # the output may be the addend itself (the planner shares them), never part of another input
    addend_is_output = add and _same_array(outputs[0], inputs[conv_inputs])
    apart(outputs, inputs[:conv_inputs] if addend_is_output else inputs)
    g = ConvGeometry(params, arrays[0].shape, arrays[1].shape, outputs[0].shape)
    out = Outputs([outputs[0]])
    batched = (0, conv_inputs) if add else (0,)
    builders = {"blocked": lambda: build_blocked_forward(g, batched, relu=relu, add=add,
                                                         addend_is_output=addend_is_output),
                "plain": lambda: build_forward(g, "plain", relu, add, addend_is_output)}
    # the replaced kernel (oneDNN's convolution, then the addition and the relu apart) does what the fused program
    # does and more passes over the output: it serves only where oneDNN refuses every program, untimed (timing it
    # would also time the convolution's own candidates inside it: VGG-16's first prediction took twice as long)
    PROGRAMS.run(("_FusedConvolution", relu, add, addend_is_output, *g.key()), builders, arrays[:-1], out.arrays,
                 replaced, fallback_competes=False)
    out.finish()


def build_backward(g: ConvGeometry, want_data: bool, layout: str, accumulate: bool = False) -> Program:
    """Inputs (out_grad, data, weight); outputs (data grad, weight grad[, bias grad]); with ``accumulate`` the
    weight and bias gradients are added to the outputs (a later chunk of the batch: the gradients sum over it)."""
    dnnl = load()
    hint = _forward_pd(dnnl, g, dnnl.FORWARD_TRAINING, layout)
    b = Builder(dnnl)
    plain_src, plain_dst, plain_weights = dnnl.plain_md(g.src), dnnl.plain_md(g.dst), g.weights_md(dnnl)
    weights_pd = getattr(dnnl, f"{g.kind}_backward_weights_pd")(
        activation_md(dnnl, g.src, layout), dnnl.any_md(g.weights), None if g.bias is None else dnnl.plain_md(g.bias),
        activation_md(dnnl, g.dst, layout), g.strides, g.dilates, g.pad_l, g.pad_r, hint)
    diff_dst_md = weights_pd.md("diff_dst")
    diff_dst = b.operand(("in", 0), plain_dst, diff_dst_md)
    if want_data:
        data_pd = getattr(dnnl, f"{g.kind}_backward_data_pd")(
            activation_md(dnnl, g.src, layout), dnnl.any_md(g.weights), activation_md(dnnl, g.dst, layout), g.strides,
            g.dilates, g.pad_l, g.pad_r, hint)
        data_diff_dst_md, data_weights_md, diff_src_md = data_pd.md("diff_dst"), data_pd.md("weights"), \
            data_pd.md("diff_src")
        # one reorder of the output gradient serves both primitives when they want one layout
        data_diff_dst = diff_dst if data_diff_dst_md.same_as(diff_dst_md) else \
            b.operand(("in", 0), plain_dst, data_diff_dst_md)
        weights = b.operand(("in", 2), plain_weights, data_weights_md)
        diff_src = b.result(("out", 0), plain_src, diff_src_md)
        b.step(data_pd, [(dnnl.ARG_DIFF_DST, data_diff_dst_md, data_diff_dst),
                         (dnnl.ARG_WEIGHTS, data_weights_md, weights), (dnnl.ARG_DIFF_SRC, diff_src_md, diff_src)])
    src_md, diff_weights_md = weights_pd.md("src"), weights_pd.md("diff_weights")
    src = b.operand(("in", 1), plain_src, src_md)
    # accumulating: the chunk's sums go to workspace slots, added to the outputs after the steps
    sums = [(("out", 1), plain_weights)] + ([] if g.bias is None else [(("out", 2), dnnl.plain_md(g.bias))])
    targets = [b.scratch(md) if accumulate else ref for ref, md in sums]
    diff_weights = b.result(targets[0], plain_weights, diff_weights_md)
    bindings = [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DIFF_DST, diff_dst_md, diff_dst),
                (dnnl.ARG_DIFF_WEIGHTS, diff_weights_md, diff_weights)]
    if g.bias is not None:
        bindings.append((dnnl.ARG_DIFF_BIAS, dnnl.plain_md(g.bias), targets[1]))
    b.step(weights_pd, bindings)
    program = b.build(pack=False)
    if accumulate:  # output += the chunk's part (oneDNN's sum may write over its first source)
        for (ref, md), part in zip(sums, targets):
            b.step(dnnl.sum_pd(md, [md, md]), [(dnnl.ARG_MULTIPLE_SRC, md, ref), (dnnl.ARG_MULTIPLE_SRC + 1, md, part),
                                               (dnnl.ARG_DST, md, ref)])
    pack_workspace(program)
    return program


@handles(**HANDLES)
def convolution_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_Convolution``: the data gradient (unless nothing reads it), the weight and bias gradients."""
    arrays = float32_arrays(list(inputs) + list(outputs))
    out_grad, data, weight = arrays[:3]
    run_backward("_backward_Convolution", ConvGeometry(params, data.shape, weight.shape, out_grad.shape),
                 _mxkit.wanted(params, 0), [out_grad, data, weight], outputs, replaced)


def run_backward(name: str, g: ConvGeometry, want_data: bool, arrays: list, outputs: list, replaced: Any) -> None:
    """Operator ``name``'s gradients of geometry ``g``: ``arrays`` (out_grad, data, weight), ``outputs`` (data
    grad, weight grad[, bias grad]); the data gradient only when ``want_data``."""
    out = Outputs(list(outputs))

    def chunked(layout: str) -> Any:
        # a program too large for the workspace runs the batch in chunks, the later ones adding their weight
        # and bias gradients (sums over the batch) to the first's
        return within_workspace_summed(lambda n, accumulate: build_backward(g.with_batch(n), want_data, layout,
                                                                            accumulate),
                                       g.src[0], batched=(0, 1), batched_outputs=(0,))

    PROGRAMS.run((name, want_data, *g.key()),
                 {"blocked": lambda: chunked("blocked"), "plain": lambda: chunked("plain")}, arrays, out.arrays,
                 replaced)
    out.finish()


__all__ = ["FUSED_HANDLES", "HANDLES", "LAYOUTS", "ConvGeometry", "Outputs", "activation_md", "build_backward",
           "build_blocked_forward", "build_forward", "apart", "convolution", "convolution_backward", "float32_arrays",
           "fused_convolution", "run_backward", "run_forward"]
