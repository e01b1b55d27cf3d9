"""Ordering under real parallelism: numpy kernels (which release the GIL) on shared buffers.

Each op computes into a buffer from other buffers, in place, the way NDArray kernels do;
with two workers running numpy at the same time, any read/write reordering changes the
numbers. The result must be bit-identical to running the same program serially.
"""

import numpy as np
import pytest

from .conftest import ENGINE_NAMES, _close, _make


def make_program(seed, num_buffers=6, num_ops=400):
    rng = np.random.default_rng(seed)
    program = []
    for _ in range(num_ops):
        i, j, k = (int(v) for v in rng.integers(0, num_buffers, size=3))
        kind = int(rng.integers(0, 4))
        program.append((kind, i, j, k))
    return program


def apply(kind, i, j, k, buffers):
    a, b, out = buffers[i], buffers[j], buffers[k]
    if kind == 0:
        np.matmul(a, b, out=out) if k not in (i, j) else out.__setitem__(..., a @ b)
        out *= 0.05
    elif kind == 1:
        out += np.tanh(a) - b
    elif kind == 2:
        out[:, 0:8] = b[:, 8:16].copy() if j == k else b[:, 8:16]
    else:
        np.clip(out, -3.0, 3.0, out=out)


def initial(seed, num_buffers=6):
    rng = np.random.default_rng(seed + 1)
    return [rng.standard_normal((96, 96)) for _ in range(num_buffers)]


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_program_matches_serial_run(engine_name, seed):
    program = make_program(seed)
    expected = initial(seed)
    for kind, i, j, k in program:
        apply(kind, i, j, k, expected)

    eng = _make(engine_name)
    try:
        buffers = initial(seed)
        vars_ = [eng.new_var() for _ in buffers]
        for kind, i, j, k in program:
            reads = [vars_[i], vars_[j]] if kind != 3 else []
            eng.push(lambda kind=kind, i=i, j=j, k=k: apply(kind, i, j, k, buffers),
                     reads=reads, writes=[vars_[k]], name=f"kind{kind}")
        eng.wait_all()
    finally:
        _close(eng)
    for got, want in zip(buffers, expected):
        np.testing.assert_array_equal(got, want)
