"""Random sampling (``mx.random`` and ``mx.nd.random``) with reproducible seeds.

Each device has one generator guarded by an engine var: every sampling operator reads
and writes that var, so samples are drawn in push order even on a threaded engine, and
:func:`seed` (itself pushed) takes effect exactly between the operations pushed before
and after it.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

import numpy as np
from mxkit.core.context import Context
from mxkit.core.errors import MXKitError
from mxkit.ndarray.invoke import backend_of, engine, invoke_by_name, resolve_context


class GeneratorState:
    """The generator of one device and the engine var that orders its use.

    Kernels receive this object as ``params["_rng"]`` and call generator methods on it
    (``uniform``, ``normal``, ``integers``, ``permutation``); it forwards them to the
    generator current when the kernel runs.
    """

    def __init__(self, ctx: Context, seed: int | None):
        self.ctx = ctx
        self.engine = engine()
        self.var = self.engine.new_var()
        self.generator = _make_generator(ctx, seed)

    def follow_engine(self) -> None:
        """Take a var of the current process engine if it was switched (the generator carries on)."""
        current = engine()
        if current is not self.engine:
            self.engine.wait_for_var(self.var)
            self.engine, self.var = current, current.new_var()

    def generator_proxy(self) -> GeneratorState:
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["generator"], name)


def _make_generator(ctx: Context, seed: int | None) -> Any:
    # one seed gives every device its own stream (data-parallel replicas must not draw the
    # same dropout masks), the same for a device in every run
    # MXNet takes any int seed, negative ones too: its two's-complement 64-bit pattern seeds the stream
    entropy = None if seed is None else [seed % 2 ** 64, zlib.crc32(f"{ctx.device_type}:{ctx.device_id}".encode())]
    return backend_of(ctx).make_rng(entropy)


_states: dict[Context, GeneratorState] = {}
_lock = threading.Lock()


_global_seed: list[int] = []  # the last mx.random.seed(s) for every device, seeds devices first used later


def _initial_seed() -> int | None:
    from mxkit.core import config

    if _global_seed:
        return _global_seed[-1]
    value = config.get("seed")
    return None if value is None or value < 0 else int(value)


def generator_state(ctx: Context) -> GeneratorState:
    """The generator state of ``ctx`` (made on first use, seeded from config ``seed``)."""
    state = _states.get(ctx)
    if state is None:
        with _lock:
            state = _states.get(ctx)
            if state is None:
                state = _states[ctx] = GeneratorState(ctx, _initial_seed())
    if state.engine is not engine():
        with _lock:
            state.follow_engine()
    return state


def seed(seed_state: int, ctx: Any = "all") -> None:
    """Seed the generators of every device (``ctx="all"``) or of one device.

    After ``mx.random.seed(s)`` the same sequence of sampling calls gives the same numbers.
    """
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)):
        raise MXKitError(f"seed must be an int, got {seed_state!r}")
    value = int(seed_state)
    if ctx == "all":
        from mxkit.core.context import current_context

        with _lock:
            _global_seed[:] = [value]
        contexts = set(_states) | {current_context()}
    else:
        contexts = {resolve_context(ctx)}
    for context in contexts:
        state = generator_state(context)

        def reseed(state: GeneratorState = state, context: Context = context) -> None:
            state.generator = _make_generator(context, value)

        engine().push(reseed, (), [state.var], context, 0, "_random_seed")


def _sample(op: str, shape: Any, dtype: Any, ctx: Any, out: Any, **params: Any) -> Any:
    if out is not None:
        shape, ctx = out.shape, out.context
        dtype = dtype if dtype is not None else out._data.dtype
    if shape is None:
        shape = (1,)
    if isinstance(shape, int):
        shape = (shape,)
    if dtype is not None:
        params["dtype"] = dtype
    return invoke_by_name(op, shape=tuple(shape), ctx=resolve_context(ctx), out=out, **params)


def _is_array(value: Any) -> bool:
    from mxkit.ndarray.ndarray import NDArray

    return isinstance(value, NDArray)


def _dispatch(dist: str, names: tuple[str, ...], values: tuple[Any, ...], shape: Any, dtype: Any, ctx: Any,
              out: Any, kwargs: dict) -> Any:
    """MXNet's rule: scalar parameters draw ``shape`` samples of one distribution
    (``_random_<dist>``); NDArray parameters draw ``shape`` samples per element
    (``_sample_<dist>``, output shape ``params.shape + shape``)."""
    arrays = [_is_array(v) for v in values]
    if all(arrays):
        params = dict(kwargs)
        if shape is not None:
            params["shape"] = (shape,) if isinstance(shape, int) else tuple(shape)
        if dtype is not None:
            params["dtype"] = dtype
        return invoke_by_name(f"_sample_{dist}", *values, out=out, **params)
    if any(arrays):
        kinds = ", ".join(f"{n}={type(v).__name__}" for n, v in zip(names, values))
        raise MXKitError(f"random.{dist}: the parameters must be all numbers or all NDArrays, got {kinds}")
    return _sample(f"_random_{dist}", shape, dtype, ctx, out, **dict(zip(names, values)), **kwargs)


def _like(dist: str, data: Any, out: Any, **params: Any) -> Any:
    return invoke_by_name(f"_random_{dist}_like", data, out=out, **params)


def uniform(low: Any = 0.0, high: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
            out: Any = None, **kwargs: Any) -> Any:
    """Samples uniformly from ``[low, high)`` (per element when ``low`` and ``high`` are NDArrays)."""
    return _dispatch("uniform", ("low", "high"), (low, high), shape, dtype, ctx, out, kwargs)


def normal(loc: Any = 0.0, scale: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
           out: Any = None, **kwargs: Any) -> Any:
    """Samples from a normal distribution with mean ``loc`` and standard deviation ``scale``."""
    return _dispatch("normal", ("loc", "scale"), (loc, scale), shape, dtype, ctx, out, kwargs)


def randn(*shape: int, loc: Any = 0.0, scale: Any = 1.0, dtype: Any = None, ctx: Any = None, out: Any = None,
          **kwargs: Any) -> Any:
    """Normal samples of the given shape (``mx.nd.random.randn(2, 3)``)."""
    return normal(loc, scale, shape=shape or None, dtype=dtype, ctx=ctx, out=out, **kwargs)


def gamma(alpha: Any = 1.0, beta: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
          out: Any = None, **kwargs: Any) -> Any:
    """Samples from a gamma distribution of shape ``alpha`` and scale ``beta`` (mean alpha * beta)."""
    return _dispatch("gamma", ("alpha", "beta"), (alpha, beta), shape, dtype, ctx, out, kwargs)


def exponential(scale: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None, out: Any = None,
                **kwargs: Any) -> Any:
    """Samples from an exponential distribution of mean ``scale`` (rate ``lam = 1 / scale``)."""
    return _dispatch("exponential", ("lam",), (1.0 / scale,), shape, dtype, ctx, out, kwargs)


def poisson(lam: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None, out: Any = None,
            **kwargs: Any) -> Any:
    """Samples from a Poisson distribution of rate ``lam`` (as floats, like MXNet)."""
    return _dispatch("poisson", ("lam",), (lam,), shape, dtype, ctx, out, kwargs)


def negative_binomial(k: Any = 1, p: Any = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
                      out: Any = None, **kwargs: Any) -> Any:
    """Samples the number of failures before the ``k``-th success of trials that succeed with probability ``p``."""
    return _dispatch("negative_binomial", ("k", "p"), (k, p), shape, dtype, ctx, out, kwargs)


def generalized_negative_binomial(mu: Any = 1.0, alpha: Any = 1.0, shape: Any = None, dtype: Any = None,
                                  ctx: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples a negative binomial of mean ``mu`` and dispersion ``alpha`` (variance mu + alpha mu^2)."""
    return _dispatch("generalized_negative_binomial", ("mu", "alpha"), (mu, alpha), shape, dtype, ctx, out,
                     kwargs)


def multinomial(data: Any, shape: Any = None, get_prob: bool = False, out: Any = None, dtype: str = "int32",
                **kwargs: Any) -> Any:
    """Category indices drawn from the distributions in the last axis of ``data``.

    Returns the samples (shape ``data.shape[:-1] + shape``), and with ``get_prob=True`` also
    their log-probabilities, through which autograd reaches ``data``.
    """
    if shape is not None:
        kwargs["shape"] = (shape,) if isinstance(shape, int) else tuple(shape)
    return invoke_by_name("_sample_multinomial", data, out=out, get_prob=get_prob, dtype=dtype, **kwargs)


def uniform_like(data: Any, low: float = 0.0, high: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Uniform samples shaped like ``data``."""
    return _like("uniform", data, out, low=low, high=high, **kwargs)


def normal_like(data: Any, loc: float = 0.0, scale: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Normal samples shaped like ``data``."""
    return _like("normal", data, out, loc=loc, scale=scale, **kwargs)


def gamma_like(data: Any, alpha: float = 1.0, beta: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Gamma samples shaped like ``data``."""
    return _like("gamma", data, out, alpha=alpha, beta=beta, **kwargs)


def exponential_like(data: Any, lam: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Exponential samples (rate ``lam``) shaped like ``data``."""
    return _like("exponential", data, out, lam=lam, **kwargs)


def poisson_like(data: Any, lam: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Poisson samples shaped like ``data``."""
    return _like("poisson", data, out, lam=lam, **kwargs)


def negative_binomial_like(data: Any, k: int = 1, p: float = 1.0, out: Any = None, **kwargs: Any) -> Any:
    """Negative binomial samples shaped like ``data``."""
    return _like("negative_binomial", data, out, k=k, p=p, **kwargs)


def generalized_negative_binomial_like(data: Any, mu: float = 1.0, alpha: float = 1.0, out: Any = None,
                                       **kwargs: Any) -> Any:
    """Generalized negative binomial samples shaped like ``data``."""
    return _like("generalized_negative_binomial", data, out, mu=mu, alpha=alpha, **kwargs)


def randint(low: int, high: int, shape: Any = None, dtype: Any = None, ctx: Any = None, out: Any = None,
            **kwargs: Any) -> Any:
    """Samples integers uniformly from ``[low, high)`` (int32 by default)."""
    if high <= low:
        raise MXKitError(f"randint needs low < high, got low={low}, high={high}")
    return _sample("_random_randint", shape, dtype, ctx, out, low=low, high=high, **kwargs)


def shuffle(data: Any, **kwargs: Any) -> Any:
    """A copy of ``data`` with its first axis randomly permuted."""
    return invoke_by_name("_shuffle", data, **kwargs)


def _density(dist: str) -> Any:
    def density(sample: Any, *params: Any, is_log: bool = False, out: Any = None, **kwargs: Any) -> Any:
        return invoke_by_name(f"_random_pdf_{dist}", sample, *params, out=out, is_log=is_log, **kwargs)

    density.__name__ = f"pdf_{dist}"
    density.__doc__ = (f"The {dist.replace('_', ' ')} density (log density with ``is_log=True``) of ``sample`` "
                       f"under the parameter arrays, as MXNet's ``random.pdf_{dist}``.")
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
           "poisson", "poisson_like", "randint", "randn", "seed", "shuffle", "uniform", "uniform_like"]
