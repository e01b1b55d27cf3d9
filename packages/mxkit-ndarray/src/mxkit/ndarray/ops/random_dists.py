"""MXNet's other samplers: gamma, exponential, Poisson, negative binomial (plain and
generalized), multinomial and the unique Zipfian candidate sampler, in three forms each:

- ``_random_<dist>``: scalar parameters and an output ``shape``;
- ``_random_<dist>_like``: scalar parameters, the shape of an input array;
- ``_sample_<dist>``: one distribution per element of the parameter arrays, ``shape``
  samples of each (output shape ``params.shape + shape``), as ``mx.nd.random.gamma(alpha=nd, ...)``.

Kernels draw from the generator passed as ``params["_rng"]`` (see :mod:`.random_ops`).
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import first_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define


def host(array):
    """A numpy view of a kernel input (cupy arrays come to the host: numpy's generator draws)."""
    return array.get() if type(array).__module__.startswith("cupy") else array


def _draw(name, rng, args, size):
    """``size`` samples of distribution ``name`` with (broadcastable) parameters ``args``."""
    if name == "uniform":
        low, high = args
        return rng.uniform(low, high, size=size)
    if name == "normal":
        return rng.normal(args[0], args[1], size=size)
    if name == "gamma":
        alpha, beta = args
        return rng.gamma(alpha, beta, size=size)
    if name == "exponential":
        return rng.exponential(1.0 / args[0], size=size)
    if name == "poisson":
        return rng.poisson(args[0], size=size)
    if name == "negative_binomial":
        k, p = args
        return rng.negative_binomial(k, p, size=size)
    if name == "generalized_negative_binomial":
        # a Poisson whose rate is Gamma(1 / alpha, alpha * mu): mean mu, variance mu + alpha mu^2;
        # alpha = 0 is the Poisson limit
        import numpy as np

        mu, alpha = np.broadcast_arrays(np.asarray(args[0], dtype=float), np.asarray(args[1], dtype=float))
        mu, alpha = np.broadcast_to(mu, size), np.broadcast_to(alpha, size)
        safe = np.where(alpha > 0, alpha, 1.0)
        rate = np.where(alpha > 0, rng.gamma(1.0 / safe, mu * safe, size=size), mu)
        return rng.poisson(rate)
    raise ShapeError(f"unknown distribution {name!r}")  # pragma: no cover (the table below is fixed)


# distribution -> (MXNet's parameter names, their defaults, a check of the values: message or None)
_DISTRIBUTIONS = {
    "uniform": (("low", "high"), (0.0, 1.0), lambda a: None if (a[1] >= a[0]).all() else "needs low <= high"),
    "normal": (("loc", "scale"), (0.0, 1.0), lambda a: None if (a[1] >= 0).all() else "needs scale >= 0"),
    "gamma": (("alpha", "beta"), (1.0, 1.0),
              lambda a: None if (a[0] > 0).all() and (a[1] > 0).all() else "needs alpha > 0 and beta > 0"),
    "exponential": (("lam",), (1.0,), lambda a: None if (a[0] > 0).all() else "needs lam > 0"),
    "poisson": (("lam",), (1.0,), lambda a: None if (a[0] >= 0).all() else "needs lam >= 0"),
    "negative_binomial": (("k", "p"), (1, 1.0),
                          lambda a: None if (a[0] > 0).all() and ((a[1] > 0) & (a[1] <= 1)).all()
                          else "needs k > 0 and 0 < p <= 1"),
    "generalized_negative_binomial": (("mu", "alpha"), (1.0, 1.0),
                                      lambda a: None if (a[0] >= 0).all() and (a[1] >= 0).all()
                                      else "needs mu >= 0 and alpha >= 0"),
}


def _checked(name, op_name, values):
    import numpy as np

    arrays = [np.asarray(v, dtype=float) for v in values]
    problem = _DISTRIBUTIONS[name][2](arrays)
    if problem is not None:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(_DISTRIBUTIONS[name][0], values))
        raise ShapeError(f"{op_name}: {shown}: the {name} distribution {problem}")
    return arrays


def _scalar_kernel(name, op_name):
    names = _DISTRIBUTIONS[name][0]

    def kernel(xp, inputs, outputs, params):
        out = outputs[0]
        args = _checked(name, op_name, [params[n] for n in names])
        write(xp, out, xp.asarray(_draw(name, params["_rng"], args, out.shape)))

    return kernel


def _sample_kernel(name, op_name):
    def kernel(xp, inputs, outputs, params):
        out = outputs[0]
        lead = inputs[0].ndim
        extra = out.ndim - lead
        args = _checked(name, op_name, [host(a).reshape(a.shape + (1,) * extra) for a in inputs])
        write(xp, out, xp.asarray(_draw(name, params["_rng"], args, out.shape)))

    return kernel


def _sample_shape(op_name, count):
    def infer(params, in_shapes):
        first = tuple(in_shapes[0])
        for other in in_shapes[1:count]:
            if tuple(other) != first:
                raise ShapeError(f"{op_name}: the parameter arrays must have one shape, got "
                                 f"{', '.join(str(tuple(s)) for s in in_shapes)}")
        return [first + tuple(params["shape"])]

    return infer


def _sample_dtype(params, in_dtypes):
    if params.get("dtype") not in (None, "None"):
        return [params["dtype"]]
    return [in_dtypes[0] if in_dtypes and in_dtypes[0] else "float32"]


#: the input names of the per-element samplers where MXNet's differ from the scalar parameters
_SAMPLE_INPUTS = {"normal": ("mu", "sigma")}

_NO_GRADIENT = dict(gradient=lambda F, p, i, o, g: [None] * len(i), backward_ignores=ALL_INPUTS)

for _name, (_names, _defaults, _check) in _DISTRIBUTIONS.items():
    _kind = "int" if _name == "negative_binomial" else "float"
    _scalars = [Param(n, _kind if n == "k" else "float", d) for n, d in zip(_names, _defaults)]
    _dtype = Param("dtype", "dtype", "float32")
    if _name not in ("uniform", "normal"):  # those two are defined with the basic samplers
        _op = f"_random_{_name}"
        define(OpDef(name=_op, aliases=(f"random_{_name}",), kernel=_scalar_kernel(_name, _op),
                     params=schema([*_scalars, Param("shape", "shape", ()), _dtype]), num_inputs=0,
                     input_names=(), infer_dtype=lambda p, d: [p["dtype"]], needs_rng=True,
                     infer_shape=lambda p, s: [p["shape"]],
                     doc=f"Samples from the {_name.replace('_', ' ')} distribution ({', '.join(_names)})."))
    _op = f"_random_{_name}_like"
    define(OpDef(name=_op, aliases=(f"random_{_name}_like",), kernel=_scalar_kernel(_name, _op),
                 params=schema(_scalars), infer_shape=first_shape, needs_rng=True, **_NO_GRADIENT,
                 doc=f"Samples from the {_name.replace('_', ' ')} distribution, shaped like the input."))
    _op = f"_sample_{_name}"
    define(OpDef(name=_op, aliases=(f"sample_{_name}",), kernel=_sample_kernel(_name, _op),
                 params=schema([Param("shape", "shape", ()), Param("dtype", "dtype", None, optional=True)]),
                 num_inputs=len(_names), input_names=_SAMPLE_INPUTS.get(_name, _names),
                 infer_shape=_sample_shape(_op, len(_names)),
                 infer_dtype=_sample_dtype, needs_rng=True, **_NO_GRADIENT,
                 doc=f"``shape`` samples of a {_name.replace('_', ' ')} distribution per element of the "
                     f"parameter arrays ({', '.join(_names)}); output shape: their shape + ``shape``."))


# ---- multinomial -----------------------------------------------------------------------------

#: the largest category index each output dtype holds exactly
_EXACT_INDEX_LIMIT = {"uint8": 2 ** 8 - 1, "int8": 2 ** 7 - 1, "float16": 2 ** 11, "float32": 2 ** 24,
                      "int32": 2 ** 31 - 1, "float64": 2 ** 53, "int64": 2 ** 63 - 1}

_MULTINOMIAL_SCHEMA = schema([
    Param("shape", "shape", (), doc="Samples drawn per distribution."),
    Param("get_prob", "bool", False, doc="Also return the log-probability of each sample."),
    Param("dtype", "dtype", "int32", doc="The dtype of the sampled indices."),
])


def _multinomial_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    if not 1 <= len(data) <= 5:
        raise ShapeError(f"_sample_multinomial: data shape {data} must have 1 to 5 axes, the last one the "
                         f"probabilities of the categories")
    categories = data[-1]
    limit = _EXACT_INDEX_LIMIT.get(params["dtype"])
    if limit is not None and categories - 1 > limit:
        raise ShapeError(f"_sample_multinomial: {categories} categories do not fit dtype {params['dtype']} "
                         f"(its largest exact index is {limit}); use int32 or float64")
    out = data[:-1] + tuple(params["shape"])
    return [out, out] if params["get_prob"] else [out]


def _multinomial_dtype(params, in_dtypes):
    return [params["dtype"], in_dtypes[0]] if params["get_prob"] else [params["dtype"]]


def _multinomial_kernel(xp, inputs, outputs, params):
    import numpy as np

    probs = np.asarray(host(inputs[0]), dtype=np.float64)
    categories = probs.shape[-1]
    rows = probs.reshape(-1, categories)
    count = int(np.prod(params["shape"], dtype=np.int64))
    uniform = params["_rng"].random((rows.shape[0], count))
    # the first category whose running total exceeds the draw (MXNet does not renormalize; a
    # draw beyond the total, from rounding, goes to the last category)
    cumulative = np.cumsum(rows, axis=1)
    picks = np.stack([np.searchsorted(c, u, side="right") for c, u in zip(cumulative, uniform)]) \
        if rows.shape[0] else np.zeros((0, count), dtype=np.int64)
    picks = np.minimum(picks, categories - 1)
    write(xp, outputs[0], xp.asarray(picks.reshape(outputs[0].shape)))
    if params["get_prob"]:
        chosen = np.take_along_axis(rows, picks, axis=1)
        with np.errstate(divide="ignore"):
            write(xp, outputs[1], xp.asarray(np.log(chosen).reshape(outputs[1].shape)))


def _multinomial_backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    prob_grad, data, samples = (np.asarray(host(a)) for a in inputs)
    categories = data.shape[-1]
    rows = data.reshape(-1, categories).astype(np.float64)
    picks = samples.reshape(rows.shape[0], -1).astype(np.int64)
    grads = prob_grad.reshape(picks.shape).astype(np.float64)
    result = np.zeros_like(rows)
    for row in range(rows.shape[0]):  # d log p[k] / d p[k] = 1 / p[k], summed over the samples of k
        np.add.at(result[row], picks[row], grads[row] / rows[row, picks[row]])
    write(xp, outputs[0], xp.asarray(result.reshape(data.shape)))


def _multinomial_gradient(F, params, inputs, outputs, out_grads):
    if not params["get_prob"] or out_grads[1] is None:
        return [None]
    shown = {k: v for k, v in params.items() if not k.startswith("_")}
    return [F("_backward_sample_multinomial", out_grads[1], inputs[0], outputs[0], **shown)]


define(OpDef(
    name="_sample_multinomial", aliases=("sample_multinomial",), infer_shape=_multinomial_shape,
    kernel=_multinomial_kernel, params=_MULTINOMIAL_SCHEMA, needs_rng=True,
    num_outputs=lambda p: 2 if p["get_prob"] else 1,
    output_names=lambda p: ("samples", "log_prob") if p["get_prob"] else ("samples",),
    infer_dtype=_multinomial_dtype, gradient=_multinomial_gradient,
    doc="Category indices drawn from the distributions in the last axis of data (probabilities); "
        "with get_prob, also their log-probabilities, whose gradient reaches data.",
))
define(OpDef(
    name="_backward_sample_multinomial", params=_MULTINOMIAL_SCHEMA, kernel=_multinomial_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])], num_inputs=3, input_names=("prob_grad", "data", "samples"),
    infer_dtype=lambda p, d: [d[1]], doc="Backward of _sample_multinomial's log-probabilities.",
))


# ---- unique Zipfian (log-uniform) candidates -------------------------------------------------

def _zipfian_shape(params, in_shapes):
    shape = tuple(params["shape"])
    if len(shape) != 2:
        raise ShapeError(f"_sample_unique_zipfian: shape={shape} must be (batch_size, num_sampled)")
    if shape[1] > params["range_max"]:
        raise ShapeError(f"_sample_unique_zipfian: cannot draw {shape[1]} unique classes out of "
                         f"range_max={params['range_max']}")
    return [shape, (shape[0],)]


def log_uniform_classes(uniform, range_max):
    """Classes in [0, range_max) of log-uniform (Zipfian) probability
    ``log((k + 2) / (k + 1)) / log(range_max + 1)`` from uniform draws in [0, 1)."""
    import numpy as np

    return (np.exp(uniform * math.log(range_max + 1)) - 1).astype(np.int64) % range_max


def _unique_zipfian_kernel(xp, inputs, outputs, params):
    import numpy as np

    batch, wanted = params["shape"]
    range_max = params["range_max"]
    rng = params["_rng"]
    samples = np.empty((batch, wanted), dtype=np.int64)
    tries = np.empty(batch, dtype=np.int64)
    for row in range(batch):
        drawn = np.empty(0, dtype=np.int64)
        while True:  # draw in blocks until `wanted` distinct classes came up; count the draws it took
            drawn = np.concatenate([drawn, log_uniform_classes(rng.random(max(wanted, 1024)), range_max)])
            _, first = np.unique(drawn, return_index=True)
            if first.size >= wanted:
                order = np.sort(first)[:wanted]
                samples[row] = drawn[order]
                tries[row] = order[-1] + 1 if wanted else 0
                break
    write(xp, outputs[0], xp.asarray(samples))
    write(xp, outputs[1], xp.asarray(tries))


define(OpDef(
    name="_sample_unique_zipfian", infer_shape=_zipfian_shape, kernel=_unique_zipfian_kernel,
    params=schema([Param("range_max", "int", doc="Classes are drawn from [0, range_max)."),
                   Param("shape", "shape", doc="(batch_size, num_sampled).")]),
    num_inputs=0, input_names=(), num_outputs=2, output_names=("samples", "num_tries"),
    infer_dtype=lambda p, d: ["int64", "int64"], needs_rng=True,
    doc="num_sampled distinct classes per batch row from the log-uniform (Zipfian) distribution over "
        "[0, range_max), and the number of draws each row took.",
))


def _rand_zipfian_shape(params, in_shapes):
    if params["range_max"] < 1 or params["num_sampled"] < 0:
        raise ShapeError(f"rand_zipfian: needs range_max >= 1 and num_sampled >= 0, got "
                         f"range_max={params['range_max']}, num_sampled={params['num_sampled']}")
    return [(params["num_sampled"],), tuple(in_shapes[0]), (params["num_sampled"],)]


def _expected_share(classes, range_max):
    import numpy as np

    classes = np.asarray(classes, dtype=np.float64)
    return np.log((classes + 2.0) / (classes + 1.0)) / math.log(range_max + 1)


def _rand_zipfian_kernel(xp, inputs, outputs, params):
    num, range_max = params["num_sampled"], params["range_max"]
    sampled = log_uniform_classes(params["_rng"].random(num), range_max)
    write(xp, outputs[0], xp.asarray(sampled))
    write(xp, outputs[1], xp.asarray(_expected_share(host(inputs[0]), range_max) * num))
    write(xp, outputs[2], xp.asarray(_expected_share(sampled, range_max) * num))


define(OpDef(
    name="_contrib_rand_zipfian", infer_shape=_rand_zipfian_shape, kernel=_rand_zipfian_kernel,
    params=schema([Param("num_sampled", "int"), Param("range_max", "int")]),
    input_names=("true_classes",), num_outputs=3,
    output_names=("sampled_classes", "expected_count_true", "expected_count_sampled"),
    infer_dtype=lambda p, d: ["int64", "float64", "float64"], needs_rng=True, **_NO_GRADIENT,
    doc="num_sampled candidate classes drawn with replacement from the log-uniform (Zipfian) "
        "distribution over [0, range_max), and the expected counts of the true and sampled classes.",
))
