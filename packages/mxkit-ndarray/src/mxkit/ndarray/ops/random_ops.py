"""Random sampling operators. Their kernels draw from the generator the caller passes as
``params["_rng"]`` (a ``numpy.random.Generator`` on CPU), so that the order in which
the engine runs them, and therefore every number drawn after ``mx.random.seed``, is fixed."""

from __future__ import annotations

import numpy as np
from mxkit.ndarray.ops._helpers import first_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_SHAPE = [Param("shape", "shape", ()), Param("dtype", "dtype", "float32")]
_KW = dict(num_inputs=0, input_names=(), infer_dtype=lambda p, d: [p["dtype"]], needs_rng=True,
           infer_shape=lambda p, s: [p["shape"]])


#: a draw into a numpy array of more elements than this goes in chunks of it: the generator's float64
#: samples of a whole VGG-16 fc6 weight were 822 MB beside the 411 MB array they initialised
DRAW_CHUNK = 1 << 20


def _draw_into(xp, out, draw):
    """``out`` filled with ``draw(shape)``, a numpy array in chunks of :data:`DRAW_CHUNK` elements.

    numpy's ``Generator`` fills its samples one element after the other from one stream, so the chunks
    hold the numbers one draw of the whole shape would (tests/test_random_dists.py checks it)."""
    if not isinstance(out, np.ndarray) or out.size <= DRAW_CHUNK or not out.flags.c_contiguous:
        write(xp, out, draw(out.shape))
        return
    flat = out.reshape(-1)
    for start in range(0, flat.size, DRAW_CHUNK):
        part = flat[start:start + DRAW_CHUNK]
        write(xp, part, draw(part.shape))


def _uniform(xp, inputs, outputs, params):
    low, high, rng = params["low"], params["high"], params["_rng"]
    _draw_into(xp, outputs[0], lambda shape: rng.uniform(low, high, size=shape))


def _normal(xp, inputs, outputs, params):
    loc, scale, rng = params["loc"], params["scale"], params["_rng"]
    _draw_into(xp, outputs[0], lambda shape: rng.normal(loc, scale, size=shape))


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
