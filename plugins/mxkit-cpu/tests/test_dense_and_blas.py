"""``dot`` and ``FullyConnected`` through the split BLAS product, against the generic kernels and
float64 numpy; and the process-wide BLAS thread limit (config ``cpu_blas_threads``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cpu_kernel_harness import is_plugin_kernel, run, split_into_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit_cpu import blas


def _tolerance(dtype) -> dict:
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


def test_the_dense_kernels_are_registered():
    for name in ("dot", "FullyConnected", "_backward_FullyConnected"):
        assert is_plugin_kernel(name), name


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 7), n=st.integers(1, 8), threads=st.integers(1, 4),
       transpose_a=st.booleans(), transpose_b=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_dot_equals_numpy_in_any_number_of_blocks(m, k, n, threads, transpose_a, transpose_b, dtype):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype)
    with split_into_blocks(threads):
        got = run("dot", [a, b], transpose_a=transpose_a, transpose_b=transpose_b)[0]
    expected = (a.T if transpose_a else a).astype(np.float64) @ (b.T if transpose_b else b).astype(np.float64)
    np.testing.assert_allclose(got, expected, **_tolerance(dtype))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("no_bias", [False, True])
@pytest.mark.parametrize("flatten, shape", [(True, (5, 2, 3, 2)), (False, (2, 3, 4)), (True, (7, 4))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_connected_and_its_gradients_equal_the_generic_kernels(threads, no_bias, flatten, shape, dtype):
    rng = np.random.default_rng(3)
    features = int(np.prod(shape[1:])) if flatten else shape[-1]
    data = rng.standard_normal(shape).astype(dtype)
    weight = rng.standard_normal((6, features)).astype(dtype)
    inputs = [data, weight] + ([] if no_bias else [rng.standard_normal(6).astype(dtype)])
    params = {"num_hidden": 6, "no_bias": no_bias, "flatten": flatten}
    with split_into_blocks(threads):
        out = run("FullyConnected", inputs, **params)[0]
        out_grad = rng.standard_normal(out.shape).astype(dtype)
        grads = run("_backward_FullyConnected", [out_grad, data, weight], **params)
    np.testing.assert_allclose(out, run("FullyConnected", inputs, generic=True, **params)[0], **_tolerance(dtype))
    expected = run("_backward_FullyConnected", [out_grad, data, weight], generic=True, **params)
    assert len(grads) == len(expected) == (2 if no_bias else 3)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, **_tolerance(dtype))


def test_an_unread_data_gradient_is_not_computed():
    rng = np.random.default_rng(1)
    data, weight = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    out_grad = rng.standard_normal((4, 2))
    grads = run("_backward_FullyConnected", [out_grad, data, weight], req=["null", "write", "write"], num_hidden=2)
    assert np.isnan(grads[0]).all()  # left as the harness made it: nothing wrote it
    np.testing.assert_allclose(grads[1], out_grad.T @ data)
    np.testing.assert_allclose(grads[2], out_grad.sum(axis=0))


def test_mixed_dtypes_go_to_the_generic_kernel():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4)).astype(np.float16)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_array_equal(run("dot", [a, b])[0], run("dot", [a, b], generic=True)[0])
    data = rng.standard_normal((3, 4)).astype(np.float16)
    weight = rng.standard_normal((2, 4)).astype(np.float16)
    np.testing.assert_array_equal(run("FullyConnected", [data, weight], num_hidden=2, no_bias=True)[0],
                                  run("FullyConnected", [data, weight], generic=True, num_hidden=2, no_bias=True)[0])


def test_product_splits_rows_across_threads():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((10, 6)), rng.standard_normal((6, 3))
    out = np.full((10, 3), np.nan)
    with split_into_blocks(4):
        blas.product(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)


def _blas_threads_in_a_fresh_process(env: dict) -> int:
    program = textwrap.dedent("""
        import mxkit.ndarray as nd
        from mxkit_cpu.parallel import blas_threads
        nd.ones((2,))  # the first CPU array makes the CPU device
        print(blas_threads())
    """)
    merged = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and not k.startswith("MXKIT_")}
    merged.update(env)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=merged, timeout=120)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores for BLAS to run 2 threads")
def test_blas_runs_one_thread_once_mxkit_uses_the_cpu_unless_configured():
    assert _blas_threads_in_a_fresh_process({"OPENBLAS_NUM_THREADS": "2"}) == 1
    assert _blas_threads_in_a_fresh_process({"OPENBLAS_NUM_THREADS": "2", "MXKIT_CPU_BLAS_THREADS": "0"}) == 2
    assert _blas_threads_in_a_fresh_process({"MXKIT_CPU_BLAS_THREADS": "2"}) == 2


def test_a_bad_blas_thread_count_is_a_config_error():
    result = subprocess.run(
        [sys.executable, "-c", "import mxkit.ndarray as nd; nd.ones((2,))"], capture_output=True, text=True,
        env={**os.environ, "MXKIT_CPU_BLAS_THREADS": "-1"}, timeout=120)
    assert result.returncode != 0
    assert "cpu_blas_threads" in result.stderr and "-1" in result.stderr
