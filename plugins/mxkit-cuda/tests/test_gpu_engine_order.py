"""Engine ordering with GPU vars: random programs of reads and writes on GPU arrays, pushed to
the threaded engine (kernels run ahead of the device on its stream, copies on the copy stream),
must give exactly what a serial numpy replay of the same program gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core import cpu, gpu
from mxkit.ndarray import array, waitall

pytestmark = pytest.mark.gpu

SHAPE = (64, 33)
STEP = st.tuples(st.sampled_from(["add", "mul", "copy_in", "to_cpu_and_back", "assign_slice", "scale"]),
                 st.integers(0, 4), st.integers(0, 4), st.floats(-2, 2, allow_nan=False, width=32))


@settings(max_examples=40, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=60))
def test_random_gpu_programs_match_a_serial_replay(program):
    rng = np.random.default_rng(len(program))
    start = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(5)]
    model = [a.copy() for a in start]
    arrays = [array(a, ctx=gpu(0)) for a in start]
    for op, i, j, value in program:
        value = np.float32(value)
        if op == "add":
            arrays[i] = arrays[i] + arrays[j]
            model[i] = model[i] + model[j]
        elif op == "mul":
            arrays[i] *= arrays[j]
            model[i] *= model[j]
        elif op == "scale":
            arrays[i] = arrays[j] * float(value)
            model[i] = model[j] * value
        elif op == "copy_in":
            arrays[j].copyto(arrays[i])
            model[i] = model[j].copy()
        elif op == "to_cpu_and_back":
            arrays[i] = arrays[j].as_in_context(cpu(0)).as_in_context(gpu(0))
            model[i] = model[j].copy()
        else:
            arrays[i][3:40] = float(value)
            model[i][3:40] = value
    for got, want in zip(arrays, model):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-5)
    waitall()
