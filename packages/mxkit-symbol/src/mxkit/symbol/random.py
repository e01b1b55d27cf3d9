"""``mx.sym.random``: sampling operators as symbols (``mx.sym.random.uniform(shape=(2, 3))``).

The parameters are those of :mod:`mxkit.ndarray.random`; the samples are drawn when the
executor runs, from the generator of its device. MXNet's ``ctx=`` is accepted and has no
effect: the device an executor is bound to draws the samples.
"""

from __future__ import annotations

from typing import Any

from mxkit.symbol.op import create
from mxkit.symbol.symbol import SymbolError


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        return (1,)
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _dispatch(dist: str, names: tuple[str, ...], values: tuple[Any, ...], shape: Any, dtype: Any,
              kwargs: dict) -> Any:
    """Scalar parameters: ``_random_<dist>``; Symbol parameters: ``_sample_<dist>``, ``shape``
    samples per element of the parameters (MXNet's rule, as in :mod:`mxkit.ndarray.random`)."""
    from mxkit.symbol.symbol import Symbol

    symbols = [isinstance(v, Symbol) for v in values]
    if all(symbols):
        params = dict(kwargs)
        if shape is not None:
            params["shape"] = (shape,) if isinstance(shape, int) else tuple(shape)
        if dtype is not None:
            params["dtype"] = dtype
        return create(f"_sample_{dist}", *values, **params)
    if any(symbols):
        kinds = ", ".join(f"{n}={type(v).__name__}" for n, v in zip(names, values))
        raise SymbolError(f"random.{dist}: the parameters must be all numbers or all Symbols, got {kinds}")
    return create(f"_random_{dist}", **dict(zip(names, values)), shape=_shape(shape), dtype=dtype, **kwargs)


def uniform(low: Any = 0.0, high: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
            **kwargs: Any) -> Any:
    """Samples uniformly from ``[low, high)``."""
    return _dispatch("uniform", ("low", "high"), (low, high), shape, dtype, kwargs)


def normal(loc: Any = 0.0, scale: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
           **kwargs: Any) -> Any:
    """Samples from a normal distribution of mean ``loc`` and standard deviation ``scale``."""
    return _dispatch("normal", ("loc", "scale"), (loc, scale), shape, dtype, kwargs)


def randn(*shape: int, loc: Any = 0.0, scale: Any = 1.0, dtype: Any = None, ctx: Any = None,
          **kwargs: Any) -> Any:
    """Normal samples of the given shape."""
    return normal(loc, scale, shape=shape or None, dtype=dtype, **kwargs)


def gamma(alpha: Any = 1.0, beta: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
          **kwargs: Any) -> Any:
    """Samples from a gamma distribution of shape ``alpha`` and scale ``beta``."""
    return _dispatch("gamma", ("alpha", "beta"), (alpha, beta), shape, dtype, kwargs)


def exponential(scale: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None, **kwargs: Any) -> Any:
    """Samples from an exponential distribution of mean ``scale``."""
    return _dispatch("exponential", ("lam",), (1.0 / scale,), shape, dtype, kwargs)


def poisson(lam: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None, **kwargs: Any) -> Any:
    """Samples from a Poisson distribution of rate ``lam``."""
    return _dispatch("poisson", ("lam",), (lam,), shape, dtype, kwargs)


def negative_binomial(k: Any = 1, p: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
                      **kwargs: Any) -> Any:
    """Samples failures before the ``k``-th success (success probability ``p``)."""
    return _dispatch("negative_binomial", ("k", "p"), (k, p), shape, dtype, kwargs)


def generalized_negative_binomial(mu: Any = 1.0, alpha: Any = 1.0, shape: Any = None, dtype: Any = None,
                                  ctx: Any = None, **kwargs: Any) -> Any:
    """Samples a negative binomial of mean ``mu`` and dispersion ``alpha``."""
    return _dispatch("generalized_negative_binomial", ("mu", "alpha"), (mu, alpha), shape, dtype, kwargs)


def multinomial(data: Any, shape: Any = None, get_prob: bool = False, dtype: str = "int32", **kwargs: Any) -> Any:
    """Category indices drawn from the distributions in the last axis of ``data``."""
    if shape is not None:
        kwargs["shape"] = (shape,) if isinstance(shape, int) else tuple(shape)
    return create("_sample_multinomial", data, get_prob=get_prob, dtype=dtype, **kwargs)


def _like(dist: str):
    def sampler(data: Any, **params: Any) -> Any:
        return create(f"_random_{dist}_like", data, **params)

    sampler.__name__ = f"{dist}_like"
    sampler.__doc__ = f"Samples of the {dist.replace('_', ' ')} distribution shaped like ``data``."
    return sampler


uniform_like = _like("uniform")
normal_like = _like("normal")
gamma_like = _like("gamma")
exponential_like = _like("exponential")
poisson_like = _like("poisson")
negative_binomial_like = _like("negative_binomial")
generalized_negative_binomial_like = _like("generalized_negative_binomial")


def randint(low: int, high: int, shape: Any = None, dtype: Any = None, ctx: Any = None,
            **kwargs: Any) -> Any:
    """Samples integers uniformly from ``[low, high)``."""
    return create("_random_randint", low=low, high=high, shape=_shape(shape), dtype=dtype, **kwargs)


def shuffle(data: Any, **kwargs: Any) -> Any:
    """The rows of ``data`` (its first axis) in random order."""
    return create("_shuffle", data, **kwargs)


def _density(dist: str):
    def density(sample: Any, *params: Any, is_log: bool = False, **kwargs: Any) -> Any:
        return create(f"_random_pdf_{dist}", sample, *params, is_log=is_log, **kwargs)

    density.__name__ = f"pdf_{dist}"
    density.__doc__ = (f"The {dist.replace('_', ' ')} density (log density with ``is_log=True``) of ``sample`` "
                       f"under the parameter symbols, as MXNet's ``random.pdf_{dist}``.")
    return density


pdf_uniform = _density("uniform")
pdf_normal = _density("normal")
pdf_gamma = _density("gamma")
pdf_exponential = _density("exponential")
pdf_poisson = _density("poisson")
pdf_negative_binomial = _density("negative_binomial")
pdf_generalized_negative_binomial = _density("generalized_negative_binomial")
pdf_dirichlet = _density("dirichlet")

__all__ = ["exponential", "exponential_like", "gamma", "gamma_like", "generalized_negative_binomial",
           "generalized_negative_binomial_like", "multinomial", "negative_binomial", "negative_binomial_like",
           "normal", "normal_like", "pdf_dirichlet", "pdf_exponential", "pdf_gamma",
           "pdf_generalized_negative_binomial", "pdf_negative_binomial", "pdf_normal", "pdf_poisson", "pdf_uniform",
           "poisson", "poisson_like", "randint", "randn", "shuffle", "uniform", "uniform_like"]
