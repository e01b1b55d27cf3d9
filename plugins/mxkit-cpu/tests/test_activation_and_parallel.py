"""Activation kernels (the same values as the generic kernels, to the bit except float32 tanh and
sigmoid, which are within 1e-6 of them: see test_fastmath.py) and the block splitting
and scratch buffers the CPU kernels share."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from cpu_kernel_harness import is_plugin_kernel, run, split_into_blocks
from mxkit.core import config
from mxkit.core.errors import ConfigError
from mxkit_cpu import _elementwise, parallel


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("act_type", ["relu", "sigmoid", "tanh", "softrelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("split", [False, True])
def test_activation_and_its_gradient_equal_the_generic_kernels(act_type, dtype, split):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5, 7)).astype(dtype)
    x.flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    with split_into_blocks(3 if split else 1):
        y = run("Activation", [x], act_type=act_type)[0]
        out_grad = rng.standard_normal(y.shape).astype(dtype)
        out_grad.flat[5] = np.inf
        grad = run(f"_backward_{act_type}", [out_grad, y])[0]
    generic = run("Activation", [x], generic=True, act_type=act_type)[0]
    if dtype == np.float32 and act_type in ("sigmoid", "tanh"):  # mxkit_cpu._fastmath: a few ulp from numpy
        np.testing.assert_allclose(y, generic, rtol=1e-6, atol=1e-37)
    else:
        np.testing.assert_array_equal(y, generic)
    np.testing.assert_array_equal(grad, run(f"_backward_{act_type}", [out_grad, y], generic=True)[0])


def test_the_activation_kernels_are_registered():
    for name in ("Activation", "tanh", "sigmoid", "_backward_relu", "_backward_sigmoid", "_backward_tanh", "RNN",
                 "_backward_RNN"):
        assert is_plugin_kernel(name), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 7, 33, 16384 + 5])
def test_relu_loop_equals_numpys_maximum_to_the_bit(dtype, size):
    # the loop is one compare and a select, compiled to SIMD code with a scalar tail: every lane
    # and the tail must give maximum(x, 0)'s bits (NaN kept, -0.0 and negatives to +0.0)
    special = np.array([np.nan, -0.0, 0.0, -1.5, 2.5, np.inf, -np.inf, np.finfo(dtype).tiny / 2], dtype)
    x = np.resize(special, size)
    x[len(special):] = np.random.default_rng(size).standard_normal(size - min(size, len(special)))
    out = np.empty_like(x)
    _elementwise.relu(x, out)
    assert out.tobytes() == np.maximum(x, 0).tobytes()


def test_relu_gradient_keeps_nan_like_the_product():
    out_grad = np.array([np.nan, np.nan, np.inf, 2.0], np.float32)
    y = np.array([1.0, 0.0, 0.0, 3.0], np.float32)
    out = np.empty_like(y)
    _elementwise.relu_backward(out_grad, y, out)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, out_grad * (y > 0))


def test_non_contiguous_and_half_precision_arrays_use_the_generic_kernels():
    x = np.random.default_rng(1).standard_normal((6, 8))[:, ::2]
    np.testing.assert_array_equal(run("Activation", [np.ascontiguousarray(x).astype(np.float16)], act_type="tanh")[0],
                                  np.tanh(x.astype(np.float16)))
    y = np.empty((6, 8))[:, ::2]
    from mxkit.ndarray.registry import get_registry

    op = get_registry().get("Activation")
    op.kernel_for("numpy")(np, [x], [y], op.parse_params(dict(act_type="relu")))
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_elementwise_loops_reject_arrays_of_different_sizes():
    with pytest.raises(ValueError, match="one size, got 3, 2 and 3"):
        _elementwise.tanh_backward(np.zeros(3), np.zeros(2), np.zeros(3))


@pytest.mark.parametrize("count, blocks", [(10, 3), (2, 3), (7, 1), (0, 2)])
def test_split_covers_the_range_in_nearly_equal_contiguous_blocks(count, blocks):
    ranges = parallel.split(count, blocks)
    assert ranges[0][0] == 0 and ranges[-1][1] == count
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    sizes = [stop - start for start, stop in ranges]
    assert len(ranges) == max(1, min(blocks, count)) and max(sizes) - min(sizes) <= 1


def test_run_blocks_runs_every_block_once_on_several_threads_and_raises_a_blocks_error():
    with split_into_blocks(3):
        seen, threads = [], set()

        def task(index, start, stop):
            seen.append((index, start, stop))
            threads.add(threading.get_ident())

        run_blocks = parallel.run_blocks
        run_blocks(task, parallel.plan_blocks(9, 10**9))
        assert sorted(seen) == [(0, 0, 3), (1, 3, 6), (2, 6, 9)]
        assert len(threads) >= 2

        def failing(index, start, stop):
            if index == 2:
                raise RuntimeError(f"block {index} failed")

        with pytest.raises(RuntimeError, match="block 2 failed"):
            run_blocks(failing, parallel.plan_blocks(9, 10**9))


def test_small_work_and_multithreaded_blas_stay_on_one_block():
    with split_into_blocks(3):
        assert len(parallel.plan_blocks(100, 10**9)) == 3
        parallel.MIN_PARALLEL_WORK = 1000
        assert parallel.plan_blocks(100, 999) == [(0, 100)]
    from threadpoolctl import threadpool_limits

    parallel.reset()
    parallel._threads = 2
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            if parallel.blas_threads() > 1:  # one core: BLAS cannot take two threads
                assert parallel.plan_blocks(100, 10**12, uses_blas=True) == [(0, 100)]
            assert len(parallel.plan_blocks(100, 10**12, uses_blas=False)) == 2
    finally:
        parallel.reset()


def test_scratch_buffers_are_reused_per_thread_and_bounded():
    parallel.clear_scratch()
    first = parallel.scratch("columns", (4, 5), np.float32)
    assert first.shape == (4, 5) and first.flags.c_contiguous
    assert np.shares_memory(parallel.scratch("columns", (4, 5), np.float32), first)
    # one buffer per name: a smaller shape is a view of it, a larger one replaces it
    assert np.shares_memory(parallel.scratch("columns", (3, 2), np.float32), first)
    assert parallel.scratch_bytes() == first.nbytes
    larger = parallel.scratch("columns", (6, 5), np.float32)
    assert not np.shares_memory(larger, first) and parallel.scratch_bytes() == larger.nbytes
    assert np.shares_memory(parallel.scratch("columns", (4, 5), np.float32), larger)
    assert not np.shares_memory(parallel.scratch("columns", (4, 5), np.float64), larger)
    other = []
    thread = threading.Thread(target=lambda: other.append(parallel.scratch("columns", (4, 5), np.float32)))
    thread.start()
    thread.join()
    assert not np.shares_memory(other[0], larger)
    for i in range(parallel.MAX_BUFFERS_PER_THREAD + 1):
        parallel.scratch(f"b{i}", (2,), np.float32)
    assert not np.shares_memory(parallel.scratch("columns", (4, 5), np.float32), larger)  # the oldest went first
    parallel.clear_scratch()
    assert parallel.scratch_bytes() == 0


def test_chunks_cover_the_range_in_order_within_the_budget():
    assert parallel.chunks(3, 13, 10, budget=40) == [(3, 7), (7, 11), (11, 13)]
    # a sample larger than the budget still gets a chunk of its own
    assert parallel.chunks(0, 3, 100, budget=40) == [(0, 1), (1, 2), (2, 3)]
    assert parallel.chunks(5, 5, 10) == []
    assert parallel.chunks(0, 4, 1) == [(0, 4)]


def test_convolution_scratch_stays_within_the_budget_whatever_the_batch(monkeypatch):
    """A batch whose column matrix is many times the budget runs in chunks: the buffers kept are
    bounded by the budget, and the results equal the generic kernel's."""
    from mxkit.ndarray.kernels import get_op
    from mxkit_cpu import conv

    monkeypatch.setattr(parallel, "SCRATCH_BYTES", 4096)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((7, 3, 9, 9)).astype(np.float32)
    weight = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    params = get_op("Convolution").parse_params(dict(kernel=(3, 3), num_filter=4, pad=(1, 1), no_bias=True))
    got, expected = np.empty((7, 4, 9, 9), np.float32), np.empty((7, 4, 9, 9), np.float32)
    done = []

    def run():
        parallel.clear_scratch()
        conv.convolution(np, [data, weight], [got], params)
        done.append(parallel.scratch_bytes())

    thread = threading.Thread(target=run)  # a fresh thread: only this call's buffers
    thread.start()
    thread.join()
    get_op("Convolution").kernel(np, [data, weight], [expected], params)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    per_sample = 3 * 9 * 9 * 9 * 4  # the columns of one sample (27 rows by 81 positions)
    # columns and products, each at most one sample past the budget; the whole batch would be 7 samples each
    assert done[0] <= 2 * max(per_sample, 4096)


def test_the_thread_count_comes_from_the_config_and_is_validated(monkeypatch):
    parallel.reset()
    try:
        with config.override(cpu_kernel_threads=5):
            assert parallel.kernel_threads() == 5
        parallel.reset()
        monkeypatch.setenv("MXKIT_CPU_KERNEL_THREADS", "-2")
        with pytest.raises(ConfigError, match="cpu_kernel_threads"):
            parallel.kernel_threads()
        monkeypatch.setenv("MXKIT_CPU_KERNEL_THREADS", "0")
        parallel.reset()
        assert parallel.kernel_threads() == parallel._cores()
    finally:
        parallel.reset()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_runs_parallel_kernels_on_threads_of_its_own():
    import multiprocessing

    with split_into_blocks(2):
        parallel.run_blocks(lambda index, start, stop: None, parallel.plan_blocks(4, 10**9))  # parent's threads
        context = multiprocessing.get_context("fork")
        with context.Pool(1) as pool:
            result = pool.apply_async(_sum_in_blocks, (8,))
            assert result.get(timeout=60) == sum(range(8))


def _sum_in_blocks(count: int) -> int:
    totals = [0] * 2
    parallel.run_blocks(lambda index, start, stop: totals.__setitem__(index, sum(range(start, stop))),
                        parallel.plan_blocks(count, 10**9))
    return sum(totals)


@pytest.mark.parametrize("kernel, pad", [((1, 1), (0, 0)), ((3, 3), (1, 1))])
def test_convolution_in_chunks_and_pointwise_match_the_generic_kernel(monkeypatch, kernel, pad):
    """Forward and gradients with the batch split into chunks of one sample (the weight and bias
    gradients summed over chunks), and the 1x1 window that skips the columns, against the generic kernel."""
    from mxkit.ndarray.kernels import get_op
    from mxkit_cpu import conv

    monkeypatch.setattr(parallel, "SCRATCH_BYTES", 1024)
    rng = np.random.default_rng(5)
    data = rng.standard_normal((5, 3, 6, 7)).astype(np.float32)
    weight = rng.standard_normal((4, 3, *kernel)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    params = get_op("Convolution").parse_params(dict(kernel=kernel, num_filter=4, pad=pad))
    got, expected = np.empty((5, 4, 6, 7), np.float32), np.empty((5, 4, 6, 7), np.float32)
    conv.convolution(np, [data, weight, bias], [got], params)
    get_op("Convolution").kernel(np, [data, weight, bias], [expected], params)
    # float32 sums of at most 27 products of unit normals: 1e-4 absolute is far above their rounding
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    out_grad = rng.standard_normal(got.shape).astype(np.float32)
    backward = get_op("_backward_Convolution")
    grads = [np.empty_like(data), np.empty_like(weight), np.empty_like(bias)]
    reference = [np.empty_like(data), np.empty_like(weight), np.empty_like(bias)]
    conv.convolution_backward(np, [out_grad, data, weight], grads, params)
    backward.kernel(np, [out_grad, data, weight], reference, params)
    for mine, theirs in zip(grads, reference):
        # the weight and bias gradients sum 5 * 42 products: a bound of 1e-3 covers float32 rounding
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-3)


def test_kernel_blocks_borrow_scratch_sets_instead_of_each_thread_keeping_one():
    """A block of run_blocks gets a scratch set lent for its length: the next block, on any thread,
    reuses it (the process keeps as many sets as blocks ran at once, not one per thread that ran
    one); blocks running at once get distinct sets."""
    import threading

    from mxkit_cpu import parallel

    parallel.clear_scratch()
    seen = []

    def block(index, start, stop):
        seen.append(parallel.scratch("probe", (1024,), np.float32))

    parallel.run_blocks(block, [(0, 1)])
    worker = threading.Thread(target=parallel.run_blocks, args=(block, [(0, 1)]))
    worker.start()
    worker.join()
    assert np.shares_memory(seen[0], seen[1])  # another thread, the same lent set
    assert parallel.scratch_bytes() == 1024 * 4

    barrier = threading.Barrier(2, timeout=30)
    together = []

    def concurrent(index, start, stop):
        together.append(parallel.scratch("probe", (1024,), np.float32))
        barrier.wait()  # both blocks hold their sets at once

    parallel.run_blocks(concurrent, [(0, 1), (1, 2)])
    assert not np.shares_memory(together[0], together[1])
    parallel.clear_scratch()
    assert parallel.scratch_bytes() == 0
