"""``mx.sym.random``: sampling operators as symbols (``mx.sym.random.uniform(shape=(2, 3))``).

The parameters are those of :mod:`mxkit.ndarray.random`; the samples are drawn when the
executor runs, from the generator of its device. MXNet's ``ctx=`` is accepted and has no
effect: the device an executor is bound to draws the samples.
"""

from __future__ import annotations

from typing import Any

from mxkit.symbol.op import create


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        return (1,)
    return (shape,) if isinstance(shape, int) else tuple(shape)


def uniform(low: float = 0.0, high: float = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
            **kwargs: Any) -> Any:
    """Samples uniformly from ``[low, high)``."""
    return create("_random_uniform", low=low, high=high, shape=_shape(shape), dtype=dtype, **kwargs)


def normal(loc: float = 0.0, scale: float = 1.0, shape: Any = None, dtype: Any = None, ctx: Any = None,
            **kwargs: Any) -> Any:
    """Samples from a normal distribution of mean ``loc`` and standard deviation ``scale``."""
    return create("_random_normal", loc=loc, scale=scale, shape=_shape(shape), dtype=dtype, **kwargs)


def randint(low: int, high: int, shape: Any = None, dtype: Any = None, ctx: Any = None,
            **kwargs: Any) -> Any:
    """Samples integers uniformly from ``[low, high)``."""
    return create("_random_randint", low=low, high=high, shape=_shape(shape), dtype=dtype, **kwargs)


def shuffle(data: Any, **kwargs: Any) -> Any:
    """The rows of ``data`` (its first axis) in random order."""
    return create("_shuffle", data, **kwargs)


__all__ = ["normal", "randint", "shuffle", "uniform"]
