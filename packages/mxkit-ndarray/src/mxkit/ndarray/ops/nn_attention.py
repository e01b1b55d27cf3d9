"""MXNet's interleaved multi-head attention products (``contrib.interleaved_matmul_*``).

Projections arrive time-major and interleaved per head: self-attention's
``queries_keys_values`` is ``(T, N, heads * 3 * D)`` laid out as ``(T, N, heads, 3, D)``;
encoder-decoder attention has ``queries (Tq, N, heads * D)`` and ``keys_values (Tk, N,
heads * 2 * D)`` laid out as ``(Tk, N, heads, 2, D)``. ``*_qk`` gives the scores
``(N * heads, Tq, Tk)`` of the queries scaled by ``1 / sqrt(D)``; ``*_valatt`` applies
attention weights ``(N * heads, Tq, Tk)`` to the values, giving ``(Tq, N, heads * D)``.
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_HEADS = schema([Param("heads", "int", doc="The number of attention heads.")])


def _split(x, heads, parts):
    """(T, N, heads * parts * D) -> (parts, N * heads, T, D)."""
    t, n, width = x.shape
    d = width // (heads * parts)
    return x.reshape(t, n, heads, parts, d).transpose(3, 1, 2, 0, 4).reshape(parts, n * heads, t, d)


def _merge(xp, parts, n, heads):
    """(parts, N * heads, T, D) -> (T, N, heads * parts * D)."""
    count, _, t, d = parts.shape
    return xp.ascontiguousarray(parts.reshape(count, n, heads, t, d).transpose(3, 1, 2, 0, 4)).reshape(
        t, n, heads * count * d)


def _check(name, shape, heads, parts):
    if len(shape) != 3 or heads < 1 or shape[2] % (heads * parts):
        raise ShapeError(f"{name}: expected (time, batch, heads * {parts} * head_dim) with heads={heads}, got "
                         f"{tuple(shape)}")
    return shape[2] // (heads * parts)


def _scale(d):
    return 1.0 / math.sqrt(d)


# ---- self-attention --------------------------------------------------------------------------

def _selfatt_qk_shape(params, in_shapes):
    t, n, _ = in_shapes[0]
    _check("interleaved_matmul_selfatt_qk", in_shapes[0], params["heads"], 3)
    return [(n * params["heads"], t, t)]


def _selfatt_qk(xp, inputs, outputs, params):
    q, k, _ = _split(inputs[0], params["heads"], 3)
    write(xp, outputs[0], (q * _scale(q.shape[-1])) @ k.swapaxes(-1, -2))


def _selfatt_qk_backward(xp, inputs, outputs, params):
    g, qkv = inputs
    q, k, _ = _split(qkv, params["heads"], 3)
    scale = _scale(q.shape[-1])
    parts = xp.stack([g @ k * scale, g.swapaxes(-1, -2) @ q * scale, xp.zeros_like(q)])
    write(xp, outputs[0], _merge(xp, parts, qkv.shape[1], params["heads"]))


def _selfatt_valatt_shape(params, in_shapes):
    t, n, _ = in_shapes[0]
    d = _check("interleaved_matmul_selfatt_valatt", in_shapes[0], params["heads"], 3)
    if tuple(in_shapes[1]) != (n * params["heads"], t, t):
        raise ShapeError(f"interleaved_matmul_selfatt_valatt: attention must be {(n * params['heads'], t, t)}, got "
                         f"{tuple(in_shapes[1])}")
    return [(t, n, params["heads"] * d)]


def _selfatt_valatt(xp, inputs, outputs, params):
    qkv, att = inputs
    v = _split(qkv, params["heads"], 3)[2]
    write(xp, outputs[0], _merge(xp, (att @ v)[None], qkv.shape[1], params["heads"]))


def _selfatt_valatt_backward(xp, inputs, outputs, params):
    g, qkv, att = inputs
    heads, n = params["heads"], qkv.shape[1]
    v = _split(qkv, heads, 3)[2]
    g_heads = _split(g, heads, 1)[0]  # (N * heads, T, D)
    zeros = xp.zeros_like(v)
    write(xp, outputs[0], _merge(xp, xp.stack([zeros, zeros, att.swapaxes(-1, -2) @ g_heads]), n, heads))
    write(xp, outputs[1], g_heads @ v.swapaxes(-1, -2))


# ---- encoder-decoder attention ----------------------------------------------------------------

def _encdec_qk_shape(params, in_shapes):
    tq, n, _ = in_shapes[0]
    tk = in_shapes[1][0]
    _check("interleaved_matmul_encdec_qk", in_shapes[0], params["heads"], 1)
    _check("interleaved_matmul_encdec_qk", in_shapes[1], params["heads"], 2)
    if in_shapes[1][1] != n:
        raise ShapeError(f"interleaved_matmul_encdec_qk: queries {tuple(in_shapes[0])} and keys_values "
                         f"{tuple(in_shapes[1])} have different batch sizes")
    return [(n * params["heads"], tq, tk)]


def _encdec_qk(xp, inputs, outputs, params):
    q = _split(inputs[0], params["heads"], 1)[0]
    k = _split(inputs[1], params["heads"], 2)[0]
    write(xp, outputs[0], (q * _scale(q.shape[-1])) @ k.swapaxes(-1, -2))


def _encdec_qk_backward(xp, inputs, outputs, params):
    g, queries, keys_values = inputs
    heads, n = params["heads"], queries.shape[1]
    q = _split(queries, heads, 1)[0]
    k = _split(keys_values, heads, 2)[0]
    scale = _scale(q.shape[-1])
    write(xp, outputs[0], _merge(xp, (g @ k * scale)[None], n, heads))
    grad_k = g.swapaxes(-1, -2) @ q * scale
    write(xp, outputs[1], _merge(xp, xp.stack([grad_k, xp.zeros_like(grad_k)]), n, heads))


def _encdec_valatt_shape(params, in_shapes):
    tk, n, _ = in_shapes[0]
    d = _check("interleaved_matmul_encdec_valatt", in_shapes[0], params["heads"], 2)
    att = tuple(in_shapes[1])
    if len(att) != 3 or att[0] != n * params["heads"] or att[2] != tk:
        raise ShapeError(f"interleaved_matmul_encdec_valatt: attention must be ({n * params['heads']}, Tq, {tk}), "
                         f"got {att}")
    return [(att[1], n, params["heads"] * d)]


def _encdec_valatt(xp, inputs, outputs, params):
    keys_values, att = inputs
    v = _split(keys_values, params["heads"], 2)[1]
    write(xp, outputs[0], _merge(xp, (att @ v)[None], keys_values.shape[1], params["heads"]))


def _encdec_valatt_backward(xp, inputs, outputs, params):
    g, keys_values, att = inputs
    heads, n = params["heads"], keys_values.shape[1]
    v = _split(keys_values, heads, 2)[1]
    g_heads = _split(g, heads, 1)[0]
    grad_v = att.swapaxes(-1, -2) @ g_heads
    write(xp, outputs[0], _merge(xp, xp.stack([xp.zeros_like(grad_v), grad_v]), n, heads))
    write(xp, outputs[1], g_heads @ v.swapaxes(-1, -2))


def _define(name, shape, kernel, backward, input_names):
    grads = len(input_names)
    define(OpDef(
        name=f"_contrib_{name}", infer_shape=shape, kernel=kernel, params=_HEADS, num_inputs=grads,
        input_names=input_names,
        gradient=lambda F, p, i, o, g: (lambda r: list(r) if grads > 1 else [r])(
            F(f"_backward_contrib_{name}", g[0], *i, **p)),
        doc=f"Interleaved multi-head attention: {name.replace('interleaved_matmul_', '')} (see the module doc).",
    ))
    define(OpDef(
        name=f"_backward_contrib_{name}", infer_shape=lambda p, s: [tuple(x) for x in s[1:]], kernel=backward,
        params=_HEADS, num_inputs=grads + 1, input_names=("out_grad", *input_names), num_outputs=grads,
        output_names=tuple(f"{n}_grad" for n in input_names), infer_dtype=lambda p, d: list(d[1:]),
        doc=f"Backward of {name}.",
    ))


_define("interleaved_matmul_selfatt_qk", _selfatt_qk_shape, _selfatt_qk, _selfatt_qk_backward,
        ("queries_keys_values",))
_define("interleaved_matmul_selfatt_valatt", _selfatt_valatt_shape, _selfatt_valatt, _selfatt_valatt_backward,
        ("queries_keys_values", "attention"))
_define("interleaved_matmul_encdec_qk", _encdec_qk_shape, _encdec_qk, _encdec_qk_backward,
        ("queries", "keys_values"))
_define("interleaved_matmul_encdec_valatt", _encdec_valatt_shape, _encdec_valatt, _encdec_valatt_backward,
        ("keys_values", "attention"))
