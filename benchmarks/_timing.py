"""Helpers shared by the benchmarks (each runs as a script from this folder): timing and anchor runs.

On a shared machine the slower blocks measure the neighbours, so every timing helper reports the
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


def run_anchor(interpreter: str | None, script: str, argument: object) -> dict:
    """Run ``script`` (which prints ``RESULT <json>``) in another interpreter (MXNet's venv, say)
    with ``json.dumps(argument)`` as its argument; ``{}`` without an interpreter or on failure."""
    import json
    import subprocess
    import sys

    if not interpreter:
        return {}
    done = subprocess.run([interpreter, "-c", script, json.dumps(argument)], capture_output=True, text=True,
                          check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"anchor run in {interpreter} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    return {}
