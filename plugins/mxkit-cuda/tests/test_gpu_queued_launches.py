"""GPU operations that can start when they are pushed launch on the pushing thread (the CUDA
backend's ``launches_asynchronously``), and their kernels still go to the compute stream when
that thread has made another stream current, so every later operation and copy is ordered
after them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mxkit import engine
from mxkit.core import gpu
from mxkit.ndarray import array, dot, invoke

pytestmark = pytest.mark.gpu


@pytest.fixture
def threaded():
    previous = engine.set_engine(engine.create("threaded_per_device"))
    try:
        yield engine.get()
    finally:
        engine.get().wait_all()
        if previous is None:
            engine.reset()
        else:
            engine.set_engine(previous)


def test_a_ready_gpu_operation_runs_on_the_pushing_thread(threaded):
    ran_on = []
    var = threaded.new_var()
    ctx = gpu(0)
    fn = invoke.on_device(ctx, invoke.backend_of(ctx), lambda: ran_on.append(threading.get_ident()))
    invoke.push_kernel(threaded, fn, [], [var], ctx, "probe", 1 << 30)  # size does not matter on a GPU
    assert ran_on == [threading.get_ident()]  # before any wait: it ran during the push
    threaded.wait_for_var(var)


def test_an_operation_bound_to_the_device_sees_the_compute_stream_whatever_the_thread_chose():
    import cupy

    backend = invoke.backend_of(gpu(0))
    seen = backend.bind_to_device(lambda: cupy.cuda.get_current_stream().ptr)
    assert seen() == backend.compute_stream.ptr == 0
    with cupy.cuda.Stream(non_blocking=True) as own:
        assert own.ptr != 0 and seen() == 0


def test_results_launched_under_a_callers_stream_are_complete_when_read(threaded):
    """Without the compute stream forced, the products would be queued on the caller's
    non-blocking stream, which the copy to the host does not wait for: it would read a
    product still being computed."""
    import cupy

    rng = np.random.default_rng(0)
    n = 2048
    x_host = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    w_host = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x, w = array(x_host, ctx=gpu(0)), array(w_host, ctx=gpu(0))
    x.wait_to_read()
    w.wait_to_read()
    cupy.cuda.Device().synchronize()
    with cupy.cuda.Stream(non_blocking=True):
        y = x
        for _ in range(8):  # ~0.3 ms of products each: a copy started too early sees unfinished work
            y = dot(y, w)
        got = y.asnumpy()
    expected = x_host.astype(np.float64)
    for _ in range(8):
        expected = expected @ w_host
    scale = np.abs(expected).max()
    # float32 products (TF32 off: the suite's fixture), 8 in a row of 2048-long sums
    assert np.abs(got - expected).max() <= 1e-4 * scale
