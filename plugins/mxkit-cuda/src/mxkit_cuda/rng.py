"""A random generator on the GPU with the subset of ``numpy.random.Generator`` that kernels call.

The sampling kernels of mxkit-ndarray are written against ``numpy.random.Generator``
(``random``, ``uniform``, ``normal``, ``integers``, ``permutation``); CuPy's ``RandomState``
draws on the device with the older names, so this class translates. Samples are made on
the device, where the kernel that asked for them runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _seed_int(seed: Any) -> int | None:
    # mxkit seeds a device with [seed, hash of the device]; CuPy wants one integer
    if seed is None:
        return None
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


class CupyGenerator:
    """``numpy.random.Generator``-like sampling with :class:`cupy.random.RandomState`."""

    def __init__(self, seed: Any = None):
        import cupy

        self._state = cupy.random.RandomState(_seed_int(seed))

    def random(self, size: Any = None, dtype: Any = np.float64) -> Any:
        """Uniform samples in [0, 1)."""
        return self._state.random_sample(size, dtype=dtype)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        """Uniform samples in [low, high)."""
        return self._state.uniform(low, high, size)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        """Normal samples."""
        return self._state.normal(loc, scale, size)

    def integers(self, low: int, high: int | None = None, size: Any = None) -> Any:
        """Integers in [low, high) (numpy's ``Generator.integers`` with ``endpoint=False``)."""
        if high is None:
            low, high = 0, low
        return self._state.randint(low, high, size)

    def permutation(self, n: int) -> Any:
        """A random permutation of ``range(n)``."""
        return self._state.permutation(n)
