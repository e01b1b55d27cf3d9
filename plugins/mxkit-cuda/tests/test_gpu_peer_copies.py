"""Copies from one GPU's array into another GPU's go device to device (``CUDABackend.copy_to``),
after the kernels that write the source, with broadcasting, casts and strided targets as the
default path through the host would give them. One GPU exercises the same calls with the
device as its own peer; the two-GPU checks skip on a machine with one."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core import gpu
from mxkit.ndarray import array, dot, invoke

pytestmark = pytest.mark.gpu


def _gpu_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy or no driver: the gpu mark skips these tests anyway
        return 0


def test_a_copy_waits_for_the_kernels_that_write_its_source():
    import cupy

    backend = invoke.backend_of(gpu(0))
    rng = np.random.default_rng(1)
    n = 2048
    x = cupy.asarray((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32))
    cupy.cuda.Device().synchronize()
    y = x
    for _ in range(8):  # queued on the compute stream, not waited for
        y = y @ x
    assert y.dtype == np.float32  # a same-dtype copy: the bytes themselves
    target = cupy.full((n, n), np.nan, np.float32)
    backend.copy_to(y, target, backend)
    np.testing.assert_array_equal(cupy.asnumpy(target), cupy.asnumpy(y))


@pytest.mark.parametrize("case", ["same", "broadcast", "cast", "strided target"])
def test_copy_to_another_gpu_array_gives_what_the_host_path_gives(case):
    import cupy

    backend = invoke.backend_of(gpu(0))
    rng = np.random.default_rng(2)
    host = rng.standard_normal((64, 48)).astype(np.float32)
    source = cupy.asarray(host)
    target = cupy.full((64, 48), np.nan, np.float32)
    written = target
    expected = host
    if case == "broadcast":
        source = cupy.asarray(host[:1])
        expected = np.broadcast_to(host[:1], (64, 48))
    elif case == "cast":
        source = cupy.asarray(host.astype(np.float64))
    elif case == "strided target":
        target = cupy.full((64, 96), np.nan, np.float32)
        written = target[:, ::2]
    backend.copy_to(source, written, backend)
    np.testing.assert_array_equal(cupy.asnumpy(written), expected)
    if case == "strided target":
        assert np.isnan(cupy.asnumpy(target[:, 1::2])).all()  # nothing between the columns written


@pytest.mark.skipif("_gpu_count() < 2", reason="needs two GPUs")
def test_ndarrays_copy_between_two_gpus_after_their_producers():
    rng = np.random.default_rng(3)
    n = 1024
    x_host = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x = array(x_host, ctx=gpu(0))
    y = x
    for _ in range(4):
        y = dot(y, x)
    on_second = y.copyto(gpu(1))
    back = (on_second * 2).copyto(gpu(0))
    expected = x_host.astype(np.float64)
    for _ in range(4):
        expected = expected @ x_host
    np.testing.assert_allclose(on_second.asnumpy(), y.asnumpy(), rtol=0, atol=0)
    np.testing.assert_allclose(back.asnumpy(), 2 * y.asnumpy(), rtol=0, atol=0)
    assert np.abs(y.asnumpy() - expected).max() <= 1e-4 * np.abs(expected).max()
