"""The plugin asks the engine for one CPU worker while oneDNN's OpenMP team spans the cores."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHECK = ("import mxkit.engine, mxkit_onednn.plugin as p; "
         "print(p.mxkit_cpu_workers(), mxkit.engine.create('threaded_per_device').num_workers)")


def _answer(**env: str) -> list[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in ("MXKIT_ONEDNN_DISABLE", "OMP_NUM_THREADS",
                                                                   "MXKIT_CPU_WORKERS")}
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120,
                            env={**inherited, **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split()[-2:]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: oneDNN's team is one thread")
def test_one_worker_while_the_openmp_team_spans_the_cores():
    assert _answer() == ["1", "1"]
    assert _answer(OMP_NUM_THREADS="2") == ["1", "1"]


def test_no_preference_when_the_team_is_one_thread_or_onednn_is_off():
    cores = str(len(os.sched_getaffinity(0)))
    assert _answer(OMP_NUM_THREADS="1") == ["None", cores]
    assert _answer(MXKIT_ONEDNN_DISABLE="1") == ["None", cores]


def test_an_explicit_cpu_workers_wins():
    assert _answer(MXKIT_CPU_WORKERS="3")[1] == "3"
