"""Replaying an executor's phases from the device's recordings of their kernels (``Backend.record``).

A phase (forward in training or prediction mode, backward) runs as segments of steps on its
first run, which warms its kernels up (compiled, algorithms searched, workspaces sized). On
its second run the executor asks the backend to record the whole phase; from then on one
engine operation replays that recording (on a GPU: one CUDA graph launch instead of a launch
per kernel, each made from Python).

A device refuses to record a step that waits for it or copies to the host (a kernel that reads
a value back to decide what to do). Then every step is tried alone: the steps that can be
recorded are recorded in runs between those that cannot, and those run as they always do,
between the replays, in order. A phase of which nothing can be recorded goes back to segments.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

_LOG = logging.getLogger("mxkit.symbol.recording")

#: a recording's replay, or None for steps that run as usual
Piece = tuple[Callable[[], None] | None, list[Any]]


class PhaseRecording:
    """The recordings of one phase of an executor, made on the phase's second run.

    Parameters
    ----------
    phase : str
        ``"forward (training)"``, ``"forward (prediction)"`` or ``"backward (training)"``.
    """

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.runs = 0
        self.pieces: list[Piece] | None = None
        self.refused = False

    @property
    def recorded(self) -> bool:
        """Whether any of the phase's steps replay from a recording."""
        return self.pieces is not None and any(replay is not None for replay, _ in self.pieces)

    def unrecorded(self) -> list[Any]:
        """The steps that run as usual between the replays (all of them before the phase is recorded)."""
        if self.pieces is None:
            return []
        return [step for replay, steps in self.pieces if replay is None for step in steps]

    def run(self, record: Callable[[Callable[[], None]], Any], steps: Sequence[Any],
            run_steps: Callable[[Sequence[Any]], None]) -> None:
        """Run the phase: record it first if not yet done (``record`` is the backend's), then replay
        the recordings and run the unrecorded steps between them, in order."""
        if self.pieces is None:
            self.pieces = split_into_recordings(record, steps, run_steps)
            if not self.recorded:
                self.refused = True
            unrecorded = self.unrecorded()
            if unrecorded:
                _LOG.info("%s: %d of %d nodes run unrecorded (%s)", self.phase, len(unrecorded), len(steps),
                          ", ".join(f"{s.name} ({s.node.op.name})" for s in unrecorded[:8]))
        for replay, chunk in self.pieces:
            if replay is None:
                run_steps(chunk)
            else:
                replay()


def split_into_recordings(record: Callable[[Callable[[], None]], Any], steps: Sequence[Any],
                          run_steps: Callable[[Sequence[Any]], None]) -> list[Piece]:
    """The phase as recordings of runs of steps and the steps that cannot be recorded, in order.

    The whole phase is tried first; if the device refuses it, each step alone, and the runs of
    steps it accepted are recorded together (a run of one keeps its trial recording).
    """
    steps = list(steps)
    whole = record(lambda: run_steps(steps))
    if whole is not None:
        return [(whole, steps)]
    if len(steps) == 1:
        return [(None, steps)]
    pieces: list[Piece] = []
    accepted: list[Any] = []
    # a lone accepted step keeps its trial recording; longer runs are recorded together (trial
    # recordings are dropped at once: each holds its kernels' temporaries)
    lone_trial: list[Callable[[], None]] = []

    def close_run() -> None:
        if not accepted:
            return
        chunk = list(accepted)
        replay = lone_trial[0] if len(chunk) == 1 else record(lambda: run_steps(chunk))
        accepted.clear()
        lone_trial.clear()
        _append(pieces, replay, chunk)

    for step in steps:
        trial = record(lambda step=step: run_steps([step]))
        if trial is None:
            close_run()
            _append(pieces, None, [step])
            continue
        accepted.append(step)
        lone_trial[:] = [trial] if len(accepted) == 1 else []
    close_run()
    return pieces


def _append(pieces: list[Piece], replay: Callable[[], None] | None, chunk: list[Any]) -> None:
    # neighbouring unrecorded steps run as one piece
    if replay is None and pieces and pieces[-1][0] is None:
        pieces[-1][1].extend(chunk)
    else:
        pieces.append((replay, chunk))
