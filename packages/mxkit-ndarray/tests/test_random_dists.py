"""Gamma, exponential, Poisson, negative binomial, multinomial and Zipfian samplers: moments
against the distributions' formulas, chi-square against scipy where it is installed, the
per-element (``_sample_*``) form, seeds, and the multinomial log-probability gradient."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd)

N = 40000


def _moments(values):
    values = values.astype(np.float64)
    return values.mean(), values.std()


# (sampler call, mean, std): the textbook moments of each parametrisation MXNet documents
CASES = [
    (lambda **k: mx.nd.random.gamma(2.0, 3.0, **k), 6.0, np.sqrt(2.0) * 3.0),
    (lambda **k: mx.nd.random.exponential(0.5, **k), 0.5, 0.5),
    (lambda **k: mx.nd.random.poisson(4.0, **k), 4.0, 2.0),
    (lambda **k: mx.nd.random.negative_binomial(3, 0.4, **k), 3 * 0.6 / 0.4, np.sqrt(3 * 0.6) / 0.4),
    (lambda **k: mx.nd.random.generalized_negative_binomial(2.0, 0.3, **k), 2.0, np.sqrt(2.0 + 0.3 * 4.0)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_scalar_samplers_match_their_moments(case):
    sampler, mean, std = CASES[case]
    mx.random.seed(11)
    values = sampler(shape=(N,)).asnumpy()
    assert values.dtype == np.float32 and values.shape == (N,)
    got_mean, got_std = _moments(values)
    # 5 standard errors of the mean; the std within 5%
    assert abs(got_mean - mean) < 5 * std / np.sqrt(N)
    assert abs(got_std - std) < 0.05 * std
    mx.random.seed(11)
    np.testing.assert_array_equal(sampler(shape=(N,)).asnumpy(), values)


def test_gamma_chi_square_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    mx.random.seed(5)
    values = mx.nd.random.gamma(0.5, 1.0, shape=(N,), dtype="float64").asnumpy()
    edges = stats.gamma.ppf(np.linspace(0, 1, 6), a=0.5, scale=1.0)
    observed = np.histogram(values, edges)[0]
    assert stats.chisquare(observed).pvalue > 1e-4


def test_per_element_parameters_draw_per_element():
    loc = mx.nd.array([[0.0, 2.5], [-9.75, -7.0]])
    scale = mx.nd.array([[1.0, 3.7], [4.2, 1.5]])
    mx.random.seed(2)
    values = mx.nd.random.normal(loc, scale, shape=(N,)).asnumpy()
    assert values.shape == (2, 2, N)
    np.testing.assert_allclose(values.mean(-1), loc.asnumpy(), atol=5 * 4.2 / np.sqrt(N))
    np.testing.assert_allclose(values.std(-1), scale.asnumpy(), rtol=0.05)
    lam = mx.nd.array([25.0, 0.5])
    counts = mx.nd.random.poisson(lam, shape=(N,)).asnumpy()
    np.testing.assert_allclose(counts.mean(-1), [25.0, 0.5], rtol=0.05)
    assert (counts == np.round(counts)).all()


def test_like_samplers_take_the_shape_of_their_input():
    out = mx.nd.random.exponential_like(mx.nd.ones((3, 4), dtype="float64"), lam=2.0)
    assert out.shape == (3, 4) and out.dtype == np.float64 and (out.asnumpy() > 0).all()


def test_mixed_scalar_and_array_parameters_are_refused():
    with pytest.raises(MXKitError, match="all numbers or all NDArrays"):
        mx.nd.random.gamma(mx.nd.ones((2,)), 1.0)


def test_bad_parameters_are_refused():
    with pytest.raises(MXKitError, match="alpha > 0"):
        mx.nd.random.gamma(-1.0, 1.0, shape=(2,)).asnumpy()
    with pytest.raises(MXKitError, match="0 < p <= 1"):
        mx.nd.random.negative_binomial(2, 1.5, shape=(2,)).asnumpy()


def test_multinomial_frequencies_log_prob_and_gradient():
    probs = np.array([[0.0, 0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1, 0.0]], dtype=np.float32)
    x = mx.nd.array(probs)
    x.attach_grad()
    mx.random.seed(9)
    with mx.autograd.record():
        samples, log_prob = mx.nd.random.multinomial(x, shape=N, get_prob=True, dtype="uint8")
        (log_prob * 5).backward()
    samples = samples.asnumpy().astype(np.int64)
    assert samples.shape == (2, N)
    for row in range(2):
        freq = np.bincount(samples[row], minlength=5) / N
        np.testing.assert_allclose(freq, probs[row], atol=0.01)
        np.testing.assert_allclose(log_prob.asnumpy()[row], np.log(probs[row][samples[row]]), rtol=1e-6)
        expected = np.bincount(samples[row], minlength=5) * 5.0
        expected[probs[row] > 0] /= probs[row][probs[row] > 0]
        np.testing.assert_allclose(x.grad.asnumpy()[row], expected, rtol=1e-5)


def test_multinomial_without_prob_returns_one_array_and_checks_the_index_dtype():
    out = mx.nd.random.multinomial(mx.nd.array([0.5, 0.5]), shape=(3, 2))
    assert out.shape == (3, 2) and out.dtype == np.int32
    with pytest.raises(MXKitError, match="do not fit dtype uint8"):
        mx.nd.random.multinomial(mx.nd.ones((300,)) / 300, dtype="uint8")


def test_unique_zipfian_draws_distinct_classes_and_counts_the_tries():
    classes, tries = mx.nd._internal._sample_unique_zipfian(1000, shape=(3, 50))
    classes, tries = classes.asnumpy(), tries.asnumpy()
    assert classes.dtype == np.int64 and classes.shape == (3, 50)
    for row in range(3):
        assert np.unique(classes[row]).size == 50
        assert 50 <= tries[row]
    assert classes.min() >= 0 and classes.max() < 1000
    with pytest.raises(MXKitError, match="unique classes"):
        mx.nd._internal._sample_unique_zipfian(10, shape=(1, 11))


def test_rand_zipfian_expected_counts_follow_the_log_uniform_law():
    true = mx.nd.array([0, 3, 19], dtype="int32")
    sampled, count_true, count_sampled = mx.nd.contrib.rand_zipfian(true, 2000, 20)
    share = lambda k: np.log((k + 2.0) / (k + 1.0)) / np.log(21.0)  # noqa: E731
    np.testing.assert_allclose(count_true.asnumpy(), share(np.array([0, 3, 19])) * 2000)
    s = sampled.asnumpy()
    np.testing.assert_allclose(count_sampled.asnumpy(), share(s) * 2000)
    freq = np.bincount(s, minlength=20) / 2000
    np.testing.assert_allclose(freq, share(np.arange(20)), atol=0.04)


def test_negative_seeds_are_accepted_and_reproducible():
    mx.random.seed(-123456789)
    first = mx.nd.random.uniform(shape=(5,)).asnumpy()
    mx.random.seed(-123456789)
    np.testing.assert_array_equal(mx.nd.random.uniform(shape=(5,)).asnumpy(), first)
    mx.random.seed(123456789)
    assert not np.array_equal(mx.nd.random.uniform(shape=(5,)).asnumpy(), first)


@pytest.mark.parametrize("kernel,params,reference", [
    ("_uniform", {"low": -2.0, "high": 3.0}, lambda rng, shape: rng.uniform(-2.0, 3.0, size=shape)),
    ("_normal", {"loc": 1.0, "scale": 0.5}, lambda rng, shape: rng.normal(1.0, 0.5, size=shape)),
])
def test_large_draws_go_in_chunks_with_the_numbers_of_one_draw(monkeypatch, kernel, params, reference):
    """A large uniform or normal draw fills its output in chunks (no float64 copy of the whole array): the
    numbers are those of one draw of the whole shape from the same generator, a last partial chunk included."""
    from mxkit.ndarray.ops import random_ops

    monkeypatch.setattr(random_ops, "DRAW_CHUNK", 7)
    out = np.empty((5, 9), np.float32)
    getattr(random_ops, kernel)(np, [], [out], {**params, "_rng": np.random.default_rng(11)})
    np.testing.assert_array_equal(out, reference(np.random.default_rng(11), (5, 9)).astype(np.float32))
    strided = np.empty((9, 5), np.float32).T  # not C-contiguous: drawn whole, the same numbers
    getattr(random_ops, kernel)(np, [], [strided], {**params, "_rng": np.random.default_rng(11)})
    np.testing.assert_array_equal(strided, out)
