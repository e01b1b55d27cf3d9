"""``mx.np.random``: MXNet's NumPy-style samplers (``size=`` rather than ``shape=``) over ``mx.nd.random``."""

from __future__ import annotations

from typing import Any

from mxkit.ndarray import NDArray
from mxkit.ndarray import random as _random


def _shape(size: Any) -> Any:
    # MXNet's np samplers draw one value (a 0-d array) when size is None
    return () if size is None else size


def uniform(low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = None, ctx: Any = None,
            out: NDArray | None = None) -> NDArray:
    """Samples from ``[low, high)`` of shape ``size``."""
    return _random.uniform(low, high, shape=_shape(size), dtype=dtype, ctx=ctx, out=out)


def normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, dtype: Any = None, ctx: Any = None,
           out: NDArray | None = None) -> NDArray:
    """Samples from a normal distribution of mean ``loc`` and standard deviation ``scale``."""
    return _random.normal(loc, scale, shape=_shape(size), dtype=dtype, ctx=ctx, out=out)


def seed(seed: int, ctx: Any = "all") -> None:
    """Seed the generators (MXNet's ``mx.np.random.seed``)."""
    _random.seed(seed, ctx=ctx)


__all__ = ["normal", "seed", "uniform"]
