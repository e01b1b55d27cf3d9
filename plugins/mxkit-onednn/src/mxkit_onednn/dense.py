"""``FullyConnected`` (forward, data, weight and bias gradients) on oneDNN's inner product, in
numpy's layout: the data as rows of ``weight.shape[1]`` features (MXNet's ``flatten`` either way:
the rows are the same), the weight as (hidden, features)."""

from __future__ import annotations

from typing import Any

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import Outputs, float32_arrays
from mxkit_onednn.kernels import ANY, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, BoundCall, Builder, Program

#: the parameters of ``FullyConnected`` the kernels implement (all of them)
HANDLES = dict(num_hidden=ANY, no_bias=ANY, flatten=ANY)


def _forward_pd(dnnl: Any, rows: int, hidden: int, features: int, bias: bool, prop_kind: int) -> Any:
    return dnnl.inner_product_forward_pd(prop_kind, dnnl.plain_md((rows, features)), dnnl.plain_md((hidden, features)),
                                         dnnl.plain_md((hidden,)) if bias else None, dnnl.plain_md((rows, hidden)))


def _build_forward(rows: int, hidden: int, features: int, bias: bool) -> Program:
    dnnl = load()
    b = Builder(dnnl)
    bindings = [(dnnl.ARG_SRC, dnnl.plain_md((rows, features)), ("in", 0)),
                (dnnl.ARG_WEIGHTS, dnnl.plain_md((hidden, features)), ("in", 1))]
    if bias:
        bindings.append((dnnl.ARG_BIAS, dnnl.plain_md((hidden,)), ("in", 2)))
    b.step(_forward_pd(dnnl, rows, hidden, features, bias, dnnl.FORWARD_INFERENCE),
           [*bindings, (dnnl.ARG_DST, dnnl.plain_md((rows, hidden)), ("out", 0))])
    return b.build()


def _build_forward_matmul(rows: int, hidden: int, features: int, bias: bool) -> Program:
    """The forward as oneDNN's matmul primitive: the data (rows x features) by the weight read as its transpose
    (features x hidden: the same bytes in layout ``ba``), the bias as a row. oneDNN 3.2 runs it on its brgemm
    kernels where its inner product takes gemm:jit: an MLP's first layer (128x784 by 784x128, 2 cores) took
    127-132 us against 158-170."""
    dnnl = load()
    b = Builder(dnnl)
    src, dst = dnnl.plain_md((rows, features)), dnnl.plain_md((rows, hidden))
    weights = dnnl.tagged_md((features, hidden), "ba")
    bindings = [(dnnl.ARG_SRC, src, ("in", 0)), (dnnl.ARG_WEIGHTS, weights, ("in", 1))]
    bias_md = dnnl.plain_md((1, hidden)) if bias else None
    if bias:
        bindings.append((dnnl.ARG_BIAS, bias_md, ("in", 2)))
    b.step(dnnl.matmul_pd(src, weights, bias_md, dst), [*bindings, (dnnl.ARG_DST, dst, ("out", 0))])
    return b.build()


def _prepare_forward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> BoundCall:
    bias = not params["no_bias"]
    arrays = float32_arrays([*inputs[:3 if bias else 2], outputs[0]])
    hidden, features = arrays[1].shape
    rows = arrays[0].size // features
    out = Outputs([outputs[0]])
    return BoundCall(PROGRAMS, ("FullyConnected", rows, hidden, features, bias),
                     # matmul first: the inner product replaces it only where it is clearly faster (MARGIN)
                     {"matmul": lambda: _build_forward_matmul(rows, hidden, features, bias),
                      "plain": lambda: _build_forward(rows, hidden, features, bias)},
                     [arrays[0].reshape(rows, features), *arrays[1:-1]], [a.reshape(rows, hidden) for a in out.arrays],
                     None if replaced is None else
                     lambda ins, outs: replaced([arrays[0], *arrays[1:-1]], [outs[0].reshape(outputs[0].shape)]),
                     out.finish_if_needed())


@handles(**HANDLES)
def fully_connected(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``FullyConnected``."""
    _prepare_forward(inputs, outputs, params, replaced).once()


fully_connected.prepare = _prepare_forward  # type: ignore[attr-defined]


def _build_backward(rows: int, hidden: int, features: int, bias: bool, want_data: bool) -> Program:
    """Inputs (out_grad, data, weight); outputs (data grad, weight grad[, bias grad])."""
    dnnl = load()
    src, weights = dnnl.plain_md((rows, features)), dnnl.plain_md((hidden, features))
    dst, bias_md = dnnl.plain_md((rows, hidden)), dnnl.plain_md((hidden,)) if bias else None
    hint = _forward_pd(dnnl, rows, hidden, features, bias, dnnl.FORWARD_TRAINING)
    b = Builder(dnnl)
    if want_data:
        b.step(dnnl.inner_product_backward_data_pd(src, weights, dst, hint),
               [(dnnl.ARG_DIFF_DST, dst, ("in", 0)), (dnnl.ARG_WEIGHTS, weights, ("in", 2)),
                (dnnl.ARG_DIFF_SRC, src, ("out", 0))])
    bindings = [(dnnl.ARG_SRC, src, ("in", 1)), (dnnl.ARG_DIFF_DST, dst, ("in", 0)),
                (dnnl.ARG_DIFF_WEIGHTS, weights, ("out", 1))]
    if bias:
        bindings.append((dnnl.ARG_DIFF_BIAS, bias_md, ("out", 2)))
    b.step(dnnl.inner_product_backward_weights_pd(src, weights, bias_md, dst, hint), bindings)
    return b.build()


def _prepare_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> BoundCall:
    bias = not params["no_bias"]
    arrays = float32_arrays(list(inputs) + list(outputs))
    out_grad, data, weight = arrays[:3]
    hidden, features = weight.shape
    rows = data.size // features
    want_data = _mxkit.wanted(params, 0)
    out = Outputs(list(outputs))
    views = [out.arrays[0].reshape(rows, features), out.arrays[1], *out.arrays[2:]]
    return BoundCall(PROGRAMS, ("_backward_FullyConnected", rows, hidden, features, bias, want_data),
                     {"plain": lambda: _build_backward(rows, hidden, features, bias, want_data)},
                     [out_grad.reshape(rows, hidden), data.reshape(rows, features), weight], views,
                     None if replaced is None else
                     lambda ins, outs: replaced([out_grad, data, weight], [outs[0].reshape(data.shape), *outs[1:]]),
                     out.finish_if_needed())


@handles(**HANDLES)
def fully_connected_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_FullyConnected``: the data gradient (unless nothing reads it), the weight and bias gradients."""
    _prepare_backward(inputs, outputs, params, replaced).once()


fully_connected_backward.prepare = _prepare_backward  # type: ignore[attr-defined]


__all__ = ["HANDLES", "fully_connected", "fully_connected_backward"]
