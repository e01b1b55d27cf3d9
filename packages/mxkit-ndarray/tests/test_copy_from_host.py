"""transfer.copy_from_host: a host array copied into an NDArray without a snapshot, ordered after the
earlier uses of the target like any write; and copies within a device pushed as small kernels."""

from __future__ import annotations

import time

import mxkit.core
import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import DTypeError, ShapeError
from mxkit.ndarray.invoke import push_raw
from mxkit.ndarray.transfer import copy_from_host


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), dtype=st.sampled_from(["float32", "int32", "uint8"]))
def test_copies_the_host_array_bitwise(shape, dtype):
    host = (np.random.default_rng(len(shape)).standard_normal(shape) * 50).astype(dtype)
    target = nd.zeros(tuple(shape), dtype=dtype)
    copy_from_host(target, host)
    np.testing.assert_array_equal(target.asnumpy(), host)


def test_a_strided_host_view_is_copied_as_its_elements():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    target = nd.zeros((4, 3))
    copy_from_host(target, base[:, ::2])
    np.testing.assert_array_equal(target.asnumpy(), base[:, ::2])


def test_runs_after_an_earlier_reader_of_the_target():
    target = nd.array(np.full((3, 3), 1.0, np.float32))
    seen = []
    nd.waitall()
    data = target._data  # the memory itself (the engine orders who touches it)

    def slow_reader():
        time.sleep(0.05)  # the copy below, if it overtook this read, would land meanwhile
        seen.append(data.copy())

    push_raw(slow_reader, [target], [], mxkit.core.cpu(), "slow_reader")
    copy_from_host(target, np.full((3, 3), 2.0, np.float32))
    nd.waitall()
    np.testing.assert_array_equal(target.asnumpy(), np.full((3, 3), 2.0))
    # the reader read the array's memory as it was before the copy
    assert seen and (seen[0] == 1.0).all()


def test_shape_and_dtype_must_match():
    target = nd.zeros((2, 3))
    with pytest.raises(ShapeError, match=r"shape \(3, 2\).*\(2, 3\)"):
        copy_from_host(target, np.zeros((3, 2), np.float32))
    with pytest.raises(DTypeError, match=r"float64.*float32"):
        copy_from_host(target, np.zeros((2, 3), np.float64))


_STEPS = st.lists(st.tuples(st.sampled_from(["copy", "host", "from_host", "scalar", "add", "mul"]),
                            st.integers(0, 2), st.integers(0, 2), st.booleans()), min_size=1, max_size=12)


@pytest.mark.parametrize("engine_name", ["threaded", "threaded_per_device"])
@settings(max_examples=8, deadline=None)
@given(steps=_STEPS)
def test_mixes_of_inline_and_queued_copies_match_a_serial_replay(engine_name, steps):
    """Copies within a device are small kernels (inline when the engine is idle), large ones queue:
    a random mix of copies and updates on small and large arrays ends as numpy's serial replay."""
    import mxkit.engine as engine

    previous = engine.set_engine(engine.create(engine_name))
    try:
        rng = np.random.default_rng(len(steps))
        sizes = {False: 16, True: 300_000}  # a copy between two large arrays touches 2.4 MB: queued
        arrays = {big: [rng.standard_normal(sizes[big]).astype(np.float32) for _ in range(3)] for big in sizes}
        nds = {big: [nd.array(a) for a in arrays[big]] for big in sizes}
        for kind, i, j, big in steps:
            ref, dev = arrays[big], nds[big]
            if kind == "copy":
                ref[i][:] = ref[j]
                dev[i][:] = dev[j]
            elif kind in ("host", "from_host"):
                host = np.full(sizes[big], float(i + 2 * j), np.float32)
                ref[i][:] = host
                if kind == "host":
                    dev[i][:] = host
                else:
                    copy_from_host(dev[i], host)
            elif kind == "scalar":
                ref[i][:] = j - 0.5
                dev[i][:] = j - 0.5
            elif kind == "add":
                ref[i] += ref[j]
                dev[i] += dev[j]
            else:
                ref[i] *= 1.5
                dev[i] *= 1.5
        for big in sizes:
            for got, want in zip(nds[big], arrays[big]):
                np.testing.assert_array_equal(got.asnumpy(), want)
    finally:
        if previous is None:  # the test's engine must not outlive it: the next get() builds the configured one
            engine.reset()
        current = engine.set_engine(previous) if previous is not None else None
        if current is not None and current is not previous:
            current.wait_all()
