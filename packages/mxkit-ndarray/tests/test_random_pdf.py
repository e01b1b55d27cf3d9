"""The random_pdf_* density operators: values and gradients against MXNet 1.9.1's
(fixtures/pdf/make_pdf_fixtures.py), the densities against closed forms computed per element
with the standard library, gradients against finite differences, and the shape errors."""

import math
import os
from types import SimpleNamespace

import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.errors import MXKitError, ShapeError

mx = SimpleNamespace(nd=mxkit.ndarray, autograd=mxkit.ndarray.autograd)

FIXTURES = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "pdf", "pdf_ops.npz"))
NAMES = ["uniform", "normal", "gamma", "exponential", "poisson", "negative_binomial",
         "generalized_negative_binomial", "dirichlet"]


def _run(name, arrays, is_log, head=None):
    inputs = [mx.nd.array(a, dtype="float64") for a in arrays]
    for a in inputs:
        a.attach_grad()
    with mx.autograd.record():
        y = getattr(mx.nd, "random_pdf_" + name)(*inputs, is_log=is_log)
    y.backward(None if head is None else mx.nd.array(head, dtype="float64"))
    return y.asnumpy(), [a.grad.asnumpy() for a in inputs]


@pytest.mark.parametrize("is_log", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_density_and_gradient_match_mxnet(name, is_log):
    tag = f"{name}_{'log' if is_log else 'pdf'}"
    count = sum(1 for k in FIXTURES.files if k.startswith(tag + "_in"))
    arrays = [FIXTURES[f"{tag}_in{i}"] for i in range(count)]
    out, grads = _run(name, arrays, is_log, FIXTURES[f"{tag}_head"])
    # MXNet computes in float64 too, but with pi as a float constant (relative error 2.8e-8, 1.4e-8
    # after the square root of the normal's normalizer); digamma and lgamma differ in the last bits
    np.testing.assert_allclose(out, FIXTURES[f"{tag}_out"], rtol=1e-7, atol=1e-12)
    # MXNet's float64 digamma (gamma and Dirichlet gradients) is off by up to ~1e-6 relative (its
    # gammaln gradient at 0.5 is -1.9635099418, the true value -1.9635100260); ours is exact to ~1e-14
    for i, grad in enumerate(grads):
        np.testing.assert_allclose(grad, FIXTURES[f"{tag}_grad{i}"], rtol=5e-6, atol=1e-9, err_msg=f"input {i}")


def _nbinom(x, k, p):
    return math.exp(math.lgamma(x + k) - math.lgamma(x + 1) - math.lgamma(k)) * p ** k * (1 - p) ** x


# name -> (samples, parameter arrays, the density of one sample given its parameters)
CLOSED_FORMS = {
    "normal": (np.array([[0.3, -1.2], [2.0, 0.1]]), [np.array([0.5, -1.0]), np.array([1.5, 0.7])],
               lambda x, m, s: math.exp(-((x - m) / s) ** 2 / 2) / (s * math.sqrt(2 * math.pi))),
    "gamma": (np.array([[0.3, 1.2], [2.0, 0.1]]), [np.array([2.5, 0.8]), np.array([1.5, 3.0])],
              lambda x, a, b: b ** a * x ** (a - 1) * math.exp(-b * x) / math.gamma(a)),
    "exponential": (np.array([[0.3, 1.2], [2.0, 0.1]]), [np.array([2.5, 0.8])],
                    lambda x, lam: lam * math.exp(-lam * x)),
    "poisson": (np.array([[0.0, 3.0], [2.0, 5.0]]), [np.array([2.5, 0.8])],
                lambda x, lam: lam ** x * math.exp(-lam) / math.factorial(int(x))),
    "negative_binomial": (np.array([[0.0, 3.0], [2.0, 5.0]]), [np.array([2.0, 4.0]), np.array([0.3, 0.6])],
                          _nbinom),
    "generalized_negative_binomial": (np.array([[0.0, 3.0], [2.0, 5.0]]),
                                      [np.array([2.0, 4.0]), np.array([0.5, 0.25])],
                                      lambda x, mu, alpha: _nbinom(x, 1 / alpha, 1 / (mu * alpha + 1))),
    "uniform": (np.array([[0.3, 0.4], [2.0, 0.1]]), [np.array([0.0, -1.0]), np.array([0.5, 3.0])],
                lambda x, lo, hi: 1 / (hi - lo)),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_density_matches_closed_form(name):
    sample, params, density = CLOSED_FORMS[name]
    out = getattr(mx.nd, "random_pdf_" + name)
    got = out(*[mx.nd.array(a, dtype="float64") for a in [sample, *params]]).asnumpy()
    want = np.array([[density(sample[i, j], *(p[i] for p in params)) for j in range(sample.shape[1])]
                     for i in range(sample.shape[0])])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    logs = getattr(mx.nd.random, "pdf_" + name)(*[mx.nd.array(a, dtype="float64") for a in [sample, *params]],
                                                  is_log=True).asnumpy()
    np.testing.assert_allclose(logs, np.log(want), rtol=1e-10, atol=1e-12)


def test_dirichlet_matches_closed_form_and_single_vector_shape():
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([0.2, 0.5, 0.3])
    want = math.gamma(alpha.sum()) / np.prod([math.gamma(a) for a in alpha]) * np.prod(x ** (alpha - 1))
    got = mx.nd.random_pdf_dirichlet(mx.nd.array(x, dtype="float64"), mx.nd.array(alpha, dtype="float64"))
    assert got.shape == (1,)
    np.testing.assert_allclose(got.asnumpy(), [want], rtol=1e-10)


@pytest.mark.parametrize("name", ["normal", "gamma", "negative_binomial", "generalized_negative_binomial",
                                  "dirichlet"])
def test_gradient_matches_finite_differences(name):
    tag = f"{name}_log"
    count = sum(1 for k in FIXTURES.files if k.startswith(tag + "_in"))
    arrays = [FIXTURES[f"{tag}_in{i}"].copy() for i in range(count)]
    head = FIXTURES[f"{tag}_head"]
    _, grads = _run(name, arrays, True, head)
    discrete = name.endswith("binomial")
    eps = 1e-6
    for i in range(1 if discrete else 0, count):
        flat = arrays[i].reshape(-1)
        for j in range(0, flat.size, max(1, flat.size // 5)):
            saved = flat[j]
            flat[j] = saved + eps
            up = (_run(name, arrays, True)[0] * head).sum()
            flat[j] = saved - eps
            down = (_run(name, arrays, True)[0] * head).sum()
            flat[j] = saved
            assert grads[i].reshape(-1)[j] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-7)


def test_float32_output_keeps_the_samples_dtype():
    got = mx.nd.random_pdf_exponential(mx.nd.array([[1.0, 2.0]]), mx.nd.array([0.5]))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.asnumpy(), 0.5 * np.exp(-0.5 * np.array([[1.0, 2.0]])), rtol=1e-6)


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ShapeError, match="leading axes of the samples"):
        mx.nd.random_pdf_normal(mx.nd.ones((2, 3)), mx.nd.ones((3,)), mx.nd.ones((3,)))
    with pytest.raises(ShapeError, match="one shape"):
        mx.nd.random_pdf_normal(mx.nd.ones((2, 3)), mx.nd.ones((2,)), mx.nd.ones((1,)))
    with pytest.raises(ShapeError, match="vector length"):
        mx.nd.random_pdf_dirichlet(mx.nd.ones((2, 4, 3)), mx.nd.ones((2, 2)))
    with pytest.raises(MXKitError):
        mx.nd.random_pdf_normal(mx.nd.ones((2, 3)), mx.nd.ones((2,)))
