"""Timing helpers shared by the benchmarks (each benchmark runs as a script from this folder).

On a shared machine the slower blocks measure the neighbours, so every helper reports the
best of several timed blocks, and :func:`time_interleaved` alternates the blocks of the
implementations it compares so that a neighbour's load hits them alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def time_interleaved(setups: dict[str, tuple[Callable[[], object], Callable[[], object]]], steps: int,
                     repeats: int, warmup: int | None = None) -> dict[str, float]:
    """Seconds per step of each ``name: (step, sync)``, the best of ``repeats`` alternating blocks
    of ``steps`` steps, after ``warmup`` steps of each (default ``max(3, steps // 4)``)."""
    warmup = max(3, steps // 4) if warmup is None else warmup
    for step, sync in setups.values():
        for _ in range(warmup):
            step()
        sync()
    best = dict.fromkeys(setups, float("inf"))
    for _ in range(repeats):
        for name, (step, sync) in setups.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            best[name] = min(best[name], (time.perf_counter() - start) / steps)
    return best


def best_seconds_per_step(step: Callable[[], object], sync: Callable[[], object], steps: int, repeats: int,
                          warmup: int | None = None) -> float:
    """Seconds per step of one implementation, the best of ``repeats`` blocks."""
    return time_interleaved({"only": (step, sync)}, steps, repeats, warmup)["only"]
