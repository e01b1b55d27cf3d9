"""``softmax`` and ``log_softmax`` (forward and gradient) along an axis, on oneDNN's softmax in
numpy's layout. A ``temperature`` other than 1, ``use_length`` (a mask from a second input) and an
output ``dtype`` other than float32 go to the replaced kernel (:data:`HANDLES`)."""

from __future__ import annotations

from typing import Any

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import Outputs, float32_arrays
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, Builder, Program

ALGORITHMS = {"softmax": "SOFTMAX_ACCURATE", "log_softmax": "SOFTMAX_LOG"}

#: the parameters of ``softmax`` and ``log_softmax`` the kernels implement
HANDLES = dict(axis=ANY, temperature=(None, 1.0), dtype=(None, "float32"), use_length=(False,))


def _axis(params: dict, ndim: int, name: str) -> int:
    if ndim > 6:
        raise Unhandled
    return _mxkit.normalize_axis(params["axis"], ndim, name)


def _forward_pd(dnnl: Any, name: str, shape: tuple, axis: int, prop_kind: int) -> Any:
    md = dnnl.plain_md(shape)
    return dnnl.softmax_forward_pd(prop_kind, getattr(dnnl, ALGORITHMS[name]), md, md, axis)


def _build_forward(name: str, shape: tuple, axis: int) -> Program:
    dnnl = load()
    md = dnnl.plain_md(shape)
    b = Builder(dnnl)
    b.step(_forward_pd(dnnl, name, shape, axis, dnnl.FORWARD_INFERENCE),
           [(dnnl.ARG_SRC, md, ("in", 0)), (dnnl.ARG_DST, md, ("out", 0))])
    return b.build()


def _build_backward(name: str, shape: tuple, axis: int) -> Program:
    """Inputs (out_grad, output); output the input's gradient."""
    dnnl = load()
    md = dnnl.plain_md(shape)
    hint = _forward_pd(dnnl, name, shape, axis, dnnl.FORWARD_TRAINING)
    pd = dnnl.softmax_backward_pd(getattr(dnnl, ALGORITHMS[name]), md, md, md, axis, hint)
    b = Builder(dnnl)
    b.step(pd, [(dnnl.ARG_DIFF_DST, md, ("in", 0)), (dnnl.ARG_DST, md, ("in", 1)),
                (dnnl.ARG_DIFF_SRC, md, ("out", 0))])
    return b.build()


def _forward(name: str):
    def kernel(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
        x, _ = float32_arrays([inputs[0], outputs[0]])
        shape = tuple(int(d) for d in x.shape)
        axis = _axis(params, x.ndim, name)
        out = Outputs([outputs[0]])
        PROGRAMS.run((name, shape, axis), {"plain": lambda: _build_forward(name, shape, axis)}, [x], out.arrays,
                     replaced)
        out.finish()

    kernel.__name__ = name
    kernel.__doc__ = f"Forward of ``{name}``."
    return handles(**HANDLES)(kernel)


def _backward(name: str):
    def kernel(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
        out_grad, y, _ = float32_arrays([inputs[0], inputs[1], outputs[0]])
        if out_grad.shape != y.shape:
            raise Unhandled
        shape = tuple(int(d) for d in y.shape)
        axis = _axis(params, y.ndim, name)
        out = Outputs([outputs[0]])
        PROGRAMS.run((f"_backward_{name}", shape, axis), {"plain": lambda: _build_backward(name, shape, axis)},
                     [out_grad, y], out.arrays, replaced)
        out.finish()

    kernel.__name__ = f"{name}_backward"
    kernel.__doc__ = f"``_backward_{name}`` from the output."
    return handles(**HANDLES)(kernel)


softmax = _forward("softmax")
log_softmax = _forward("log_softmax")
softmax_backward = _backward("softmax")
log_softmax_backward = _backward("log_softmax")

__all__ = ["HANDLES", "log_softmax", "log_softmax_backward", "softmax", "softmax_backward"]
