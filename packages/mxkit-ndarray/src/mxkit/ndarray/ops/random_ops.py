"""Random sampling operators. Their kernels draw from the generator the caller passes as
``params["_rng"]`` (a ``numpy.random.Generator`` on CPU), so that the order in which
the engine runs them, and therefore every number drawn after ``mx.random.seed``, is fixed."""

from __future__ import annotations

from mxkit.ndarray.ops._helpers import first_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_SHAPE = [Param("shape", "shape", ()), Param("dtype", "dtype", "float32")]
_KW = dict(num_inputs=0, input_names=(), infer_dtype=lambda p, d: [p["dtype"]], needs_rng=True,
           infer_shape=lambda p, s: [p["shape"]])


def _uniform(xp, inputs, outputs, params):
    out = outputs[0]
    write(xp, out, params["_rng"].uniform(params["low"], params["high"], size=out.shape))


def _normal(xp, inputs, outputs, params):
    out = outputs[0]
    write(xp, out, params["_rng"].normal(params["loc"], params["scale"], size=out.shape))


def _randint(xp, inputs, outputs, params):
    out = outputs[0]
    write(xp, out, params["_rng"].integers(params["low"], params["high"], size=out.shape))


define(OpDef(name="_random_uniform", aliases=("uniform", "random_uniform"), kernel=_uniform,
             params=schema([Param("low", "float", 0.0), Param("high", "float", 1.0), *_SHAPE]),
             doc="Samples uniformly from [low, high).", **_KW))
define(OpDef(name="_random_normal", aliases=("normal", "random_normal"), kernel=_normal,
             params=schema([Param("loc", "float", 0.0), Param("scale", "float", 1.0), *_SHAPE]),
             doc="Samples from a normal distribution.", **_KW))
define(OpDef(name="_random_randint", aliases=("random_randint",), kernel=_randint,
             params=schema([Param("low", "int"), Param("high", "int"), Param("shape", "shape", ()),
                            Param("dtype", "dtype", "int32")]),
             doc="Samples integers uniformly from [low, high).", **_KW))


def _shuffle(xp, inputs, outputs, params):
    data = inputs[0]
    order = params["_rng"].permutation(data.shape[0]) if data.ndim else None
    write(xp, outputs[0], data[order] if order is not None else data)


define(OpDef(name="_shuffle", aliases=("shuffle",), infer_shape=first_shape, kernel=_shuffle, needs_rng=True,
             doc="A copy of the input with its first axis randomly permuted."))
