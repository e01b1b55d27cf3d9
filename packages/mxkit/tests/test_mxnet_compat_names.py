"""MXNet 1.x names that ported code imports: base, util, test_utils (and its star import), mon, contrib."""

import subprocess
import sys

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError


def test_base_helpers():
    assert mx.base._as_list(3) == [3]
    items = [1, 2]
    assert mx.base._as_list(items) is items
    assert mx.base._as_list((1, 2)) == [(1, 2)]  # MXNet wraps tuples too
    assert mx.base.mx_real_t is np.float32
    err = mx.base.NotImplementedForSymbol(np.sum, "sum")
    assert isinstance(err, mx.base.MXNetError)
    assert "sum" in str(err) and "Symbol" in str(err)


def test_data_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("MXKIT_DATA_DIR", raising=False)
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    assert mx.base.data_dir() == str(tmp_path)
    monkeypatch.setenv("MXKIT_DATA_DIR", str(tmp_path / "x"))
    assert mx.base.data_dir() == str(tmp_path / "x")


def test_np_shape_flag_scopes_and_threads():
    assert not mx.is_np_shape()
    with mx.np_shape(True):
        assert mx.util.is_np_shape()
        with mx.np_shape(False):
            assert not mx.is_np_shape()
        assert mx.is_np_shape()
    assert not mx.is_np_shape()

    @mx.use_np_shape
    def inside():
        return mx.is_np_shape()

    assert inside() and not mx.is_np_shape()
    assert mx.set_np_shape(True) is False
    assert mx.set_np_shape(False) is True
    with pytest.raises(TypeError, match="decorates a function or a class"):
        mx.util.use_np_shape(3)


def test_star_import_gives_what_mxnet_callers_use():
    code = ("from mxkit.mx.test_utils import *\n"
            "g = globals()\nprint(all(n in g for n in ['mx', 'np', 'rnd', 'sys', 'os', 'NDArray',"
            " 'assert_almost_equal', 'verify_generator', 'retry', 'random_sample', 'use_np', 'Context']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_retry_reruns_only_assertion_failures():
    calls = []

    @mx.test_utils.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) == 2

    flaky()
    assert len(calls) == 2

    @mx.test_utils.retry(2)
    def broken():
        raise AssertionError("always")

    with pytest.raises(AssertionError, match="always"):
        broken()
    with pytest.raises(ValueError):
        mx.test_utils.retry(0)


def test_random_sample_is_a_subset_without_repeats():
    picked = mx.test_utils.random_sample(list(range(10)), 4)
    assert len(picked) == 4 and len(set(picked)) == 4 and set(picked) <= set(range(10))
    with pytest.raises(ValueError):
        mx.test_utils.random_sample([1, 2], 3)


def test_verify_generator_accepts_right_and_rejects_wrong_distribution():
    import scipy.stats as ss

    buckets, probs = mx.test_utils.gen_buckets_probs_with_ppf(lambda q: ss.norm.ppf(q, 0, 1), 5)
    rng = np.random.default_rng(0)
    pvalues = mx.test_utils.verify_generator(lambda n: rng.normal(0, 1, n), buckets, probs, nsamples=20000,
                                             nrepeat=3)
    assert len(pvalues) == 3
    with pytest.raises(AssertionError, match="generator test fails"):
        mx.test_utils.verify_generator(lambda n: rng.normal(0.5, 1, n), buckets, probs, nsamples=20000, nrepeat=3)
    # discrete: buckets are the values
    pvalues = mx.test_utils.verify_generator(lambda n: rng.integers(0, 4, n), [0, 1, 2, 3], [0.25] * 4,
                                             nsamples=20000, nrepeat=2)
    assert all(p > 0 for p in pvalues)


def test_mean_and_var_checks():
    rng = np.random.default_rng(1)
    assert mx.test_utils.mean_check(lambda n: rng.normal(2.0, 1.0, n), 2.0, 1.0, nsamples=100000)
    assert not mx.test_utils.mean_check(lambda n: rng.normal(2.5, 1.0, n), 2.0, 1.0, nsamples=100000)
    assert mx.test_utils.var_check(lambda n: rng.normal(0, 2.0, n), 2.0, nsamples=100000)


def test_collapse_sum_like_matches_broadcast_gradient():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    np.testing.assert_array_equal(mx.test_utils.collapse_sum_like(a, (3, 1)), a.sum(axis=(0, 2)).reshape(3, 1))
    np.testing.assert_array_equal(mx.test_utils.collapse_sum_like(a, (2, 3, 4)), a)


def test_compare_optimizer_finds_a_difference():
    sgd = mx.optimizer.SGD(learning_rate=0.1)
    mx.test_utils.compare_optimizer(sgd, mx.optimizer.SGD(learning_rate=0.1), (3, 4), np.float32)
    with pytest.raises(AssertionError):
        mx.test_utils.compare_optimizer(sgd, mx.optimizer.SGD(learning_rate=0.2), (3, 4), np.float32)
    # sparse weights and gradients are compared too (their dense copies go to the first optimizer)
    mx.test_utils.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                                    mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 4), np.float32,
                                    w_stype="row_sparse", g_stype="row_sparse")


def test_same_symbol_structure_and_same_array():
    x = mx.sym.var("x")
    assert mx.test_utils.same_symbol_structure(mx.sym.relu(x), mx.sym.relu(mx.sym.var("y")))
    assert not mx.test_utils.same_symbol_structure(mx.sym.relu(x), mx.sym.sigmoid(x))
    a = mx.nd.ones((2, 2))
    assert mx.test_utils.same_array(a, a) and not mx.test_utils.same_array(a, a.copy())


def test_monitor_collects_rms_of_outputs_and_arguments():
    x = mx.sym.var("x")
    net = mx.sym.relu(x * 2, name="act")
    exe = net.simple_bind(mx.cpu(), x=(2, 3))
    values = np.array([[-1.0, 2.0, 3.0], [4.0, -5.0, 6.0]], dtype=np.float32)
    exe.arg_dict["x"][:] = values
    mon = mx.mon.Monitor(1, pattern="act.*|x")
    mon.install(exe)
    mon.tic()
    exe.forward(is_train=False)
    results = {name: float(text.split()[0]) for _, name, text in mon.toc()}
    relu = np.maximum(values * 2, 0)
    assert results["act_output"] == pytest.approx(np.sqrt(np.mean(relu ** 2)), rel=1e-6)
    assert results["x"] == pytest.approx(np.sqrt(np.mean(values ** 2)), rel=1e-6)
    assert mon.toc() == []  # not active until the next tic
    with pytest.raises(ValueError, match="positive int"):
        mx.mon.Monitor(0)


def test_contrib_namespaces():
    assert mx.contrib.nd is mx.nd.contrib
    assert mx.contrib.symbol is mx.sym.contrib
    with pytest.raises(AttributeError, match="names are"):
        mx.contrib.not_a_module  # noqa: B018


def test_mxnet_error_is_the_base_of_every_error():
    with pytest.raises(mx.base.MXNetError):
        mx.nd.zeros((2,), stype="csr")
    assert issubclass(MXKitError, mx.base.MXNetError)


def test_amp_import_path_exists_and_says_it_is_not_provided():
    from mxkit.mx.contrib.amp import amp

    assert mx.contrib.amp.amp is amp
    with pytest.raises(mx.contrib.amp.AMPNotSupportedError, match="automatic mixed precision is not provided"):
        amp.init()
    with pytest.raises(NotImplementedError):
        mx.contrib.amp.convert_symbol(mx.sym.var("x"))


def test_py_slice_is_the_builtin():
    from mxkit.ndarray.ndarray import py_slice

    assert py_slice is slice
