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
