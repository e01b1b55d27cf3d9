"""Dense layers: ``FullyConnected`` and ``Embedding``, with their backward operators."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import is_floating, write
from mxkit.ndarray.ops.nn_common import as_list, expect_shape, fmt, public, wanted
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import size_of

# ---- FullyConnected --------------------------------------------------------------------------

_FC_SCHEMA = schema([
    Param("num_hidden", "int", doc="Number of output units."),
    Param("no_bias", "bool", False, doc="Whether to leave out the bias."),
    Param("flatten", "bool", True, doc="Collapse every input axis but the first; otherwise apply to the last axis."),
])


def _fc_input_names(params: dict) -> tuple[str, ...]:
    return ("data", "weight") if params["no_bias"] else ("data", "weight", "bias")


def _fc_in_features(params: dict, data_shape) -> int:
    return size_of(data_shape[1:]) if params["flatten"] else int(data_shape[-1])


def _fc_shape(params: dict, in_shapes: list) -> list:
    num_hidden = params["num_hidden"]
    if num_hidden <= 0:
        raise ShapeError(f"FullyConnected: num_hidden={num_hidden} must be positive")
    data = in_shapes[0]
    if data is None or len(data) == 0:
        raise ShapeError(f"FullyConnected: data shape {fmt(data)} must have at least one axis")
    data = tuple(data)  # (batch,) with flatten=True is (batch, 1) data, as in MXNet
    features = _fc_in_features(params, data)
    expect_shape("FullyConnected", "weight", in_shapes[1], (num_hidden, features),
                 f"(num_hidden, input features) for num_hidden={num_hidden} and data {data}")
    if not params["no_bias"]:
        expect_shape("FullyConnected", "bias", in_shapes[2], (num_hidden,), f"(num_hidden,) = ({num_hidden},)")
    if params["flatten"]:
        return [(data[0], num_hidden)]
    return [(*data[:-1], num_hidden)]


def _fc_kernel(xp, inputs, outputs, params):
    data, weight = inputs[0], inputs[1]
    out = outputs[0]
    rows = data.reshape(-1, weight.shape[1])
    if out.flags.c_contiguous and out.dtype == rows.dtype:
        # the product straight into the output (a reshape of a contiguous array is a view)
        target = out.reshape(-1, weight.shape[0])
        xp.matmul(rows, weight.T, out=target)
        if not params["no_bias"]:
            target += inputs[2]
        return
    value = rows @ weight.T
    if not params["no_bias"]:
        value = value + inputs[2]
    write(xp, out, value.reshape(out.shape))


def _fc_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, weight = inputs
    features = weight.shape[1]
    grad_rows = out_grad.reshape(-1, weight.shape[0])
    rows = data.reshape(-1, features)
    if wanted(params, 0):  # a first layer's data gradient is read by nothing
        write(xp, outputs[0], (grad_rows @ weight).reshape(data.shape))
    write(xp, outputs[1], grad_rows.T @ rows)
    if not params["no_bias"]:
        write(xp, outputs[2], grad_rows.sum(axis=0))


def _fc_gradient(F, params, inputs, outputs, out_grads):
    grads = as_list(F("_backward_FullyConnected", out_grads[0], inputs[0], inputs[1], **public(params)))
    return grads


define(OpDef(
    name="FullyConnected", infer_shape=_fc_shape, kernel=_fc_kernel, params=_FC_SCHEMA,
    num_inputs=lambda p: 2 if p["no_bias"] else 3, input_names=_fc_input_names,
    gradient=_fc_gradient, backward_ignores=frozenset({2}),
    doc="A fully connected layer: ``data @ weight.T + bias`` (``data`` flattened to 2-D unless flatten=False).",
))
define(OpDef(
    name="_backward_FullyConnected", params=_FC_SCHEMA, kernel=_fc_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])] + ([] if p["no_bias"] else [(p["num_hidden"],)]),
    num_inputs=3, input_names=("out_grad", "data", "weight"),
    num_outputs=lambda p: 2 if p["no_bias"] else 3,
    output_names=lambda p: _fc_input_names(p),
    infer_dtype=lambda p, d: [d[1], d[2]] + ([] if p["no_bias"] else [d[2]]),
    doc="Backward of FullyConnected: the gradients of data, weight and bias.",
))

# ---- Embedding -------------------------------------------------------------------------------

_EMBEDDING_SCHEMA = schema([
    Param("input_dim", "int", doc="Vocabulary size: indices run from 0 to input_dim - 1."),
    Param("output_dim", "int", doc="Dimension of each embedding vector."),
    Param("dtype", "dtype", "float32", doc="The dtype of the weight and the output."),
    Param("sparse_grad", "bool", False, doc="Ignored: the weight gradient is always dense here."),
])


def _embedding_shape(params: dict, in_shapes: list) -> list:
    input_dim, output_dim = params["input_dim"], params["output_dim"]
    if input_dim <= 0 or output_dim <= 0:
        raise ShapeError(f"Embedding: input_dim={input_dim} and output_dim={output_dim} must both be positive")
    expect_shape("Embedding", "weight", in_shapes[1], (input_dim, output_dim), "(input_dim, output_dim)")
    return [(*tuple(in_shapes[0]), output_dim)]


def _embedding_rows(xp, indices, input_dim: int):
    # MXNet clips out-of-range indices (take's mode="clip") rather than failing
    return xp.clip(indices.astype(xp.int64) if is_floating(indices.dtype) else indices, 0, input_dim - 1)


def _embedding_kernel(xp, inputs, outputs, params):
    rows = _embedding_rows(xp, inputs[0], params["input_dim"])
    write(xp, outputs[0], inputs[1][rows])


def _embedding_backward_kernel(xp, inputs, outputs, params):
    out_grad, indices = inputs[0], inputs[1]
    rows = _embedding_rows(xp, indices, params["input_dim"]).reshape(-1)
    weight_grad = xp.zeros(outputs[1].shape, dtype=out_grad.dtype)
    xp.add.at(weight_grad, rows, out_grad.reshape(-1, params["output_dim"]))
    outputs[0][...] = 0
    write(xp, outputs[1], weight_grad)


define(OpDef(
    name="Embedding", infer_shape=_embedding_shape, kernel=_embedding_kernel, params=_EMBEDDING_SCHEMA,
    num_inputs=2, input_names=("data", "weight"),
    infer_dtype=lambda p, d: [p["dtype"]],
    gradient=lambda F, p, i, o, g: as_list(F("_backward_Embedding", g[0], i[0], i[1], **public(p))),
    backward_ignores=frozenset({1}),  # the weight's shape is read, never its values
    doc="Looks up rows of ``weight`` by the integer indices in ``data``: output shape data.shape + (output_dim,).",
))
define(OpDef(
    name="_backward_Embedding", params=_EMBEDDING_SCHEMA, kernel=_embedding_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), (p["input_dim"], p["output_dim"])],
    num_inputs=3, input_names=("out_grad", "data", "weight"), num_outputs=2, output_names=("data", "weight"),
    infer_dtype=lambda p, d: [d[1], d[0]],
    doc="Backward of Embedding: no gradient for the indices, row sums of out_grad for the weight.",
))
