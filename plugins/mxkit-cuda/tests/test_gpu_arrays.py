"""NDArrays on ``gpu(0)``: creation, host and device round trips, copies, memory statistics."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core import cpu, gpu
from mxkit.core.context import gpu_memory_info, num_gpus
from mxkit.core.errors import DeviceError
from mxkit.ndarray import array, empty, ones, waitall, zeros

pytestmark = pytest.mark.gpu

DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int32", "int64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_device_round_trip_keeps_values_and_dtype(dtype):
    host = (np.random.default_rng(0).standard_normal((7, 13)) * 50).astype(dtype)
    on_gpu = array(host, ctx=gpu(0), dtype=dtype)
    assert on_gpu.context == gpu(0) and on_gpu.dtype == np.dtype(dtype)
    back = on_gpu.asnumpy()
    assert isinstance(back, np.ndarray) and back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, host)


def test_large_round_trip_bypasses_the_staging_buffer():
    host = np.random.default_rng(1).standard_normal(20_000_000).astype(np.float32)  # 80 MB
    np.testing.assert_array_equal(array(host, ctx=gpu(0)).asnumpy(), host)


def test_copies_between_cpu_and_gpu_in_both_directions():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    a_cpu = array(host)
    a_gpu = a_cpu.as_in_context(gpu(0))
    assert a_gpu.context == gpu(0)
    b_gpu = (a_gpu * 2 + 1)
    b_cpu = b_gpu.copyto(cpu(0))
    np.testing.assert_array_equal(b_cpu.asnumpy(), host * 2 + 1)
    target = zeros((4, 6), ctx=gpu(0))
    a_cpu.copyto(target)
    np.testing.assert_array_equal(target.asnumpy(), host)


def test_a_host_array_changed_after_assignment_does_not_change_the_gpu_copy():
    host = np.ones((3, 3), dtype=np.float32)
    target = empty((3, 3), ctx=gpu(0))
    target[:] = host
    host[:] = 7
    np.testing.assert_array_equal(target.asnumpy(), np.ones((3, 3)))


def test_assignment_into_strided_gpu_views_and_scalars():
    target = zeros((4, 6), ctx=gpu(0))
    target[1:3] = 5.0
    target[:, 4] = np.array([1, 2, 3, 4], dtype=np.float32)
    expected = np.zeros((4, 6), dtype=np.float32)
    expected[1:3] = 5.0
    expected[:, 4] = [1, 2, 3, 4]
    np.testing.assert_array_equal(target.asnumpy(), expected)
    np.testing.assert_array_equal(target[1:3, 4:].asnumpy(), expected[1:3, 4:])


def test_a_long_chain_of_gpu_operations_runs_ahead_and_syncs_at_asnumpy():
    x = ones((256, 256), ctx=gpu(0))
    for _ in range(200):
        x = x * 1.01 - 0.005
    expected = np.ones((256, 256), dtype=np.float32)
    for _ in range(200):
        expected = expected * np.float32(1.01) - np.float32(0.005)
    np.testing.assert_allclose(x.asnumpy(), expected, rtol=1e-5)
    waitall()


def test_operands_on_different_devices_fail_with_a_clear_error():
    with pytest.raises(DeviceError, match="different devices"):
        _ = ones((2,), ctx=gpu(0)) + ones((2,), ctx=cpu(0))


def test_a_missing_device_id_says_how_many_there_are():
    with pytest.raises(DeviceError, match=r"this machine has \d+ GPU"):
        _ = ones((2,), ctx=gpu(num_gpus()))


def test_memory_info_and_pool_statistics():
    free, total = gpu_memory_info(0)
    assert 0 < free <= total
    backend = gpu(0).backend
    backend.reset_peak()
    before = backend.memory_stats()
    big = zeros((64, 1024, 1024), ctx=gpu(0))  # 256 MiB
    big.wait_to_read()
    during = backend.memory_stats()
    assert during["in_use"] >= before["in_use"] + 256 * 2**20
    assert during["peak"] >= during["in_use"]
    del big
    waitall()
    after = backend.memory_stats()
    assert after["in_use"] <= during["in_use"] - 256 * 2**20
    assert after["pooled"] >= 256 * 2**20  # freed into the pool, not yet to the driver
    backend.release()
    assert backend.memory_stats()["pooled"] < after["pooled"]


def test_num_gpus_counts_the_devices():
    import cupy

    assert num_gpus() == cupy.cuda.runtime.getDeviceCount() >= 1
