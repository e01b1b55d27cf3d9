"""CosineEmbeddingLoss, SDMLLoss and CTCLoss against MXNet 1.9.1 (``fixtures/loss_extra.npz``,
written by ``fixtures/make_loss_extra_fixtures.py``) and numpy, imperative and hybridized.

Tolerances: float32 sums of a handful of products (cosine) and CTC's log-sum-exp over 7 steps
agree with MXNet's to ~1e-6 relative; rtol=1e-5 leaves an order of magnitude (SDML: see there)."""

import os

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, loss

FIXTURES = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "loss_extra.npz"))


def _nd(key):
    return mx.nd.array(FIXTURES[key])


@pytest.mark.parametrize("case, margin", [("cosine", 0.0), ("cosine_margin", 0.2)])
@pytest.mark.parametrize("hybridize", [False, True])
def test_cosine_embedding_loss_is_mxnets(case, margin, hybridize):
    fn = loss.CosineEmbeddingLoss(margin=margin)
    if hybridize:
        fn.hybridize()
    got = fn(_nd(f"{case}_input1"), _nd(f"{case}_input2"), _nd(f"{case}_label")).asnumpy()
    np.testing.assert_allclose(got, FIXTURES[f"{case}_loss"], rtol=1e-5, atol=1e-6)
    a, b, label = FIXTURES[f"{case}_input1"], FIXTURES[f"{case}_input2"], FIXTURES[f"{case}_label"]
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    want = np.where(label == 1, 1 - cos, np.maximum(0, cos - margin))[:, None]  # numpy's own formula
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sdml_loss_is_mxnets_and_numpys():
    x1, x2 = FIXTURES["sdml_x1"], FIXTURES["sdml_x2"]
    got = loss.SDMLLoss(smoothing_parameter=0.2)(mx.nd.array(x1), mx.nd.array(x2)).asnumpy()
    # a KL divergence of O(0.1) from log-probabilities of distances up to ~10 in float32: terms of
    # that size cancel, leaving absolute differences of a few 1e-6 between summation orders
    np.testing.assert_allclose(got, FIXTURES["sdml_loss"], rtol=1e-4, atol=2e-5)
    n = len(x1)
    distances = ((x1[:, None, :].astype(np.float64) - x2[None, :, :]) ** 2).sum(-1)
    logp = -distances - np.log(np.exp(-distances).sum(1, keepdims=True))
    labels = np.where(np.eye(n) == 1, 0.8, 0.2 / (n - 1))
    want = (labels * (np.log(labels + 1e-12) - logp)).sum(1)  # MXNet 1.9.1's KLDivLoss sums per sample
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_sdml_loss_refuses_what_it_cannot_compute():
    with pytest.raises(GluonError, match="at least 2"):
        loss.SDMLLoss()(mx.nd.ones((1, 3)), mx.nd.ones((1, 3)))
    with pytest.raises(GluonError, match="one \\(batch, dim\\) shape"):
        loss.SDMLLoss()(mx.nd.ones((2, 3)), mx.nd.ones((2, 4)))


@pytest.mark.parametrize("layout, label_layout", [("NTC", "NT"), ("TNC", "NT"), ("TNC", "TN"), ("NTC", "TN")])
def test_ctc_loss_is_mxnets_in_every_layout(layout, label_layout):
    pred, label = FIXTURES["ctc_pred"], FIXTURES["ctc_label"]
    if layout == "TNC":
        pred = pred.transpose(1, 0, 2)
    if label_layout == "TN":
        label = label.T
    fn = loss.CTCLoss(layout=layout, label_layout=label_layout)
    np.testing.assert_allclose(fn(mx.nd.array(pred), mx.nd.array(label)).asnumpy(), FIXTURES["ctc_loss"], rtol=1e-5)
    got = fn(mx.nd.array(pred), mx.nd.array(label), _nd("ctc_pred_lengths"), _nd("ctc_label_lengths"))
    np.testing.assert_allclose(got.asnumpy(), FIXTURES["ctc_lengths_loss"], rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{"layout": "NCT"}, {"label_layout": "TT"}])
def test_ctc_loss_refuses_unknown_layouts(kwargs):
    with pytest.raises(GluonError, match="layout"):
        loss.CTCLoss(**kwargs)
