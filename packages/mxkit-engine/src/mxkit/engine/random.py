"""Deterministic randomness on a parallel engine: one generator and one seed var per device.

Every random-number operation is pushed as a *write* of its device's seed var, so the
engine runs the draws of one device in push order whatever the thread timing: two runs
seeded alike give the same numbers (MXNet 1.x's per-device random resource). Reseeding
is itself a write of the seed vars, ordered among the draws. ::

    streams = RandomStreams(engine.get(), seed=42)
    out = {}
    streams.push_random(lambda gen: out.update(x=gen.standard_normal(3)), writes=(x_var,))
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from mxkit.core.context import Context, cpu
from mxkit.core.errors import EngineError


def numpy_generator(ctx: Context, seed: int) -> Any:
    """The default per-device generator: numpy's PCG64, one independent stream per device."""
    import numpy as np

    device_key = zlib.crc32(f"{ctx.device_type}:{ctx.device_id}".encode())
    return np.random.Generator(np.random.PCG64([seed, device_key]))


class RandomStreams:
    """Per-device random generators whose use is ordered by an engine.

    Parameters
    ----------
    engine : engine
        The engine the random operations are pushed to.
    seed : int
        The seed of every device's stream (each device gets its own stream from it).
    make_generator : callable, optional
        ``make_generator(ctx, seed) -> generator``; by default :func:`numpy_generator`
        (a GPU backend passes one making its own generators).
    """

    def __init__(self, engine: Any, seed: int = 0,
                 make_generator: Callable[[Context, int], Any] = numpy_generator):
        self._engine = engine
        self._seed = _checked_seed(seed)
        self._make_generator = make_generator
        self._generators: dict[Context, Any] = {}
        self._vars: dict[Context, Any] = {}

    def seed_var(self, ctx: Context | None = None) -> Any:
        """The engine var that every random operation on ``ctx`` writes."""
        ctx = cpu(0) if ctx is None else ctx
        var = self._vars.get(ctx)
        if var is None:
            var = self._vars.setdefault(ctx, self._engine.new_var(name=f"random seed {ctx}"))
        return var

    def push_random(self, fn: Callable[[Any], Any], reads: Any = (), writes: Any = (),
                    ctx: Context | None = None, priority: int = 0, name: str | None = None) -> None:
        """Push ``fn(generator)``, ordered after every earlier random operation on ``ctx``."""
        if not callable(fn):
            raise EngineError(f"push_random needs a callable fn(generator), got {fn!r}")
        if type(writes) not in (tuple, list):
            raise EngineError(f"writes must be a tuple or list of vars, got {writes!r}")
        ctx = cpu(0) if ctx is None else ctx
        seed_var = self.seed_var(ctx)

        def draw() -> None:
            fn(self._generator(ctx))

        self._engine.push(draw, reads=reads, writes=(*writes, seed_var), ctx=ctx, priority=priority,
                          name=name or getattr(fn, "__name__", "random"))

    def seed(self, seed: int) -> None:
        """Reseed every device's stream, after the draws already pushed (``mx.random.seed``)."""
        seed = _checked_seed(seed)
        contexts = list(self._vars)

        def reseed() -> None:
            self._seed = seed
            self._generators.clear()

        if not contexts:
            reseed()
            return
        self._engine.push(reseed, writes=tuple(self._vars[c] for c in contexts), name="random.seed")

    def _generator(self, ctx: Context) -> Any:
        generator = self._generators.get(ctx)
        if generator is None:
            generator = self._generators[ctx] = self._make_generator(ctx, self._seed)
        return generator


def _checked_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise EngineError(f"a random seed must be a non-negative int, got {seed!r}")
    return seed


__all__ = ["RandomStreams", "numpy_generator"]
