"""MXNet's density operators ``_random_pdf_<dist>`` (aliases ``random_pdf_<dist>``, and
``mx.nd.random.pdf_<dist>``): the probability density (or mass) of samples under
distributions given per element of parameter arrays, or its log with ``is_log=True``.

As in MXNet 1.9.1 (``src/operator/random/pdf_op.h``): the parameter arrays share one shape,
which is the leading part of the samples' shape (each parameter element has
``sample.size / param.size`` samples); the output has the samples' shape. The Dirichlet
density takes vector parameters: ``alpha`` is ``(..., k)`` and the samples ``(..., n, k)``,
the output ``(..., n)`` (``(1,)`` for a single vector sample). Parameters are the samplers'
except where MXNet's densities name them otherwise (normal: ``mu``, ``sigma``; gamma:
``alpha`` and the *rate* ``beta``). Nothing checks that a sample lies in the support,
as MXNet does not.

The gradient reaches every parameter (summed over its samples) and the samples of the
continuous distributions; the discrete ones' samples, and the uniform's, get zero, as in
MXNet. Densities are computed in float64 and stored in the samples' dtype.
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.elementwise_extra import digamma, gammaln
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define, same_dtype_as_first

_SCHEMA = schema([Param("is_log", "bool", False,
                        doc="Compute the log of the density instead of the density.")])


def _host64(array):
    import numpy as np

    return np.asarray(array.get() if type(array).__module__.startswith("cupy") else array, dtype=np.float64)


# ---- log densities and their partial derivatives (numpy, float64, broadcast arrays) ------------------


def _uniform(x, low, high):
    import numpy as np

    width = high - low
    lpdf = -np.log(width) + 0.0 * x
    return lpdf, 0.0 * x, [1.0 / width + 0.0 * x, -1.0 / width + 0.0 * x]


def _normal(x, mu, sigma):
    import numpy as np

    var = sigma * sigma
    lpdf = -0.5 * (x - mu) ** 2 / var - np.log(math.sqrt(2.0 * math.pi) * sigma)
    return lpdf, (mu - x) / var, [(x - mu) / var, ((x - mu) ** 2 - var) / (var * sigma)]


def _gamma(x, alpha, beta):
    import numpy as np

    lpdf = alpha * np.log(beta) + (alpha - 1.0) * np.log(x) - beta * x - gammaln(alpha)
    return lpdf, (alpha - 1.0) / x - beta, [np.log(beta) + np.log(x) - digamma(alpha), alpha / beta - x]


def _exponential(x, lam):
    import numpy as np

    return np.log(lam) - lam * x, -lam + 0.0 * x, [1.0 / lam - x]


def _poisson(x, lam):
    import numpy as np

    return x * np.log(lam) - gammaln(x + 1.0) - lam, 0.0 * x, [x / lam - 1.0]


def _negative_binomial(x, k, p):
    import numpy as np

    # p is the probability of a failure, as MXNet's sampler has it
    lpdf = gammaln(x + k) - gammaln(x + 1.0) - gammaln(k) + k * np.log(p) + x * np.log1p(-p)
    return lpdf, 0.0 * x, [digamma(x + k) - digamma(k) + np.log(p), k / p - x / (1.0 - p)]


def _generalized_negative_binomial(x, mu, alpha):
    # MXNet's reparameterization: k = 1 / alpha, p = 1 / (mu * alpha + 1)
    den = mu * alpha + 1.0
    lpdf, _, (grad_k, grad_p) = _negative_binomial(x, 1.0 / alpha, 1.0 / den)
    return lpdf, 0.0 * x, [-grad_p * alpha / (den * den), -grad_k / (alpha * alpha) - grad_p * mu / (den * den)]


#: name -> (log density, parameter names, whether the samples are vectors (Dirichlet))
_DENSITIES = {
    "uniform": (_uniform, ("low", "high")),
    "normal": (_normal, ("mu", "sigma")),
    "gamma": (_gamma, ("alpha", "beta")),
    "exponential": (_exponential, ("lam",)),
    "poisson": (_poisson, ("lam",)),
    "negative_binomial": (_negative_binomial, ("k", "p")),
    "generalized_negative_binomial": (_generalized_negative_binomial, ("mu", "alpha")),
}


def _dirichlet(x, alpha):
    """Log density of vector samples ``x`` (..., k) under ``alpha`` (broadcast to x): the
    (...,) log densities, their gradient in x and in alpha (both (..., k))."""
    import numpy as np

    total = alpha.sum(axis=-1)
    lpdf = ((alpha - 1.0) * np.log(x)).sum(axis=-1) + gammaln(total) - gammaln(alpha).sum(axis=-1)
    grad_alpha = np.log(x) + digamma(total)[..., None] - digamma(alpha)
    return lpdf, (alpha - 1.0) / x, grad_alpha


# ---- shapes --------------------------------------------------------------------------------------


def _shape(op_name, vector):
    def infer(params, in_shapes):
        sample, first = tuple(in_shapes[0]), tuple(in_shapes[1])
        for other in in_shapes[2:]:
            if tuple(other) != first:
                raise ShapeError(f"{op_name}: the parameter arrays must have one shape, got "
                                 f"{', '.join(str(tuple(s)) for s in in_shapes[1:])}")
        expected = sample[:len(first)]
        if vector and sample:
            expected = expected[:-1] + sample[-1:]
        if len(first) > len(sample) or first != expected:
            what = ("the leading axes of the samples with the last one the vector length" if vector
                    else "the leading axes of the samples")
            raise ShapeError(f"{op_name}: parameter shape {first} must be {what}; the samples have "
                             f"shape {sample}")
        if vector:
            return [sample[:-1] if len(sample) > 1 else (1,)]
        return [sample]

    return infer


def _backward_shape(params, in_shapes):
    return [tuple(s) for s in in_shapes[1:]]


# ---- kernels -------------------------------------------------------------------------------------


def _aligned(param, sample_ndim, vector):
    """A parameter array reshaped to broadcast against the samples (its axes first)."""
    if vector:
        return param.reshape(param.shape[:-1] + (1,) * (sample_ndim - param.ndim) + param.shape[-1:])
    return param.reshape(param.shape + (1,) * (sample_ndim - param.ndim))


def _evaluate(name, inputs):
    import numpy as np

    vector = name == "dirichlet"
    sample = _host64(inputs[0])
    params = [_aligned(_host64(p), sample.ndim, vector) for p in inputs[1:]]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if vector:
            lpdf, grad_x, grad_alpha = _dirichlet(sample, np.broadcast_to(params[0], sample.shape))
            return sample, lpdf, grad_x, [grad_alpha]
        sample_b, *params_b = np.broadcast_arrays(sample, *params)
        lpdf, grad_x, grad_params = _DENSITIES[name][0](sample_b, *params_b)
        return sample, lpdf, grad_x, grad_params


def _kernel(name):
    def kernel(xp, inputs, outputs, params):
        import numpy as np

        _, lpdf, _, _ = _evaluate(name, inputs)
        value = lpdf if params["is_log"] else np.exp(lpdf)
        write(xp, outputs[0], xp.asarray(value.reshape(outputs[0].shape)))

    return kernel


def _backward_kernel(name):
    def kernel(xp, inputs, outputs, params):
        import numpy as np

        vector = name == "dirichlet"
        out_grad, rest = _host64(inputs[0]), inputs[1:]
        _sample, lpdf, grad_x, grad_params = _evaluate(name, rest)
        scaling = out_grad.reshape(lpdf.shape) * (1.0 if params["is_log"] else np.exp(lpdf))
        if vector:
            scaling = scaling[..., None]
        write(xp, outputs[0], xp.asarray(scaling * grad_x))
        for index, grad in enumerate(grad_params, start=1):
            param_shape = tuple(rest[index].shape)
            total = scaling * grad
            if vector:  # sum over the sample axes between the parameter's leading axes and k
                lead = len(param_shape) - 1
                total = total.sum(axis=tuple(range(lead, total.ndim - 1))) if total.ndim - 1 > lead else total
            else:
                total = total.reshape((*param_shape, -1)).sum(axis=-1)
            write(xp, outputs[index], xp.asarray(total.reshape(param_shape)))

    return kernel


def _define(name, param_names):
    op_name, vector = f"_random_pdf_{name}", name == "dirichlet"
    count = len(param_names)
    define(OpDef(
        name=op_name, aliases=(f"random_pdf_{name}",), kernel=_kernel(name), params=_SCHEMA,
        infer_shape=_shape(op_name, vector), num_inputs=1 + count, input_names=("sample", *param_names),
        infer_dtype=same_dtype_as_first,
        gradient=lambda F, p, i, o, g: list(F(f"_backward_pdf_{name}", g[0], *i, **p)),
        doc=f"The {name.replace('_', ' ')} density (or its log) of the samples, parameters "
            f"{', '.join(param_names)} per leading element of the samples.",
    ))
    define(OpDef(
        name=f"_backward_pdf_{name}", kernel=_backward_kernel(name), params=_SCHEMA,
        infer_shape=_backward_shape, num_inputs=2 + count,
        input_names=("out_grad", "sample", *param_names), num_outputs=1 + count,
        output_names=("sample_grad", *(f"{n}_grad" for n in param_names)),
        infer_dtype=lambda p, d: list(d[1:]), doc=f"Backward of {op_name}.",
    ))


for _name, (_function, _names) in _DENSITIES.items():
    _define(_name, _names)
_define("dirichlet", ("alpha",))

#: the distributions that have a density operator, with MXNet's parameter names
DENSITY_PARAMETERS = {**{n: names for n, (_, names) in _DENSITIES.items()}, "dirichlet": ("alpha",)}
