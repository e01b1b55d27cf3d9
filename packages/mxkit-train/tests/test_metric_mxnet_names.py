"""Metrics by MXNet's names and strings: 'pcc' against MXNet 1.9.1, JSON configs as mx.metric.create takes them."""

import json
import pathlib

import numpy as np
import pytest
from mxkit.train import metric
from mxkit.train._registry import UnknownNameError
from mxkit.train.metric.classification import multiclass_pcc

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def test_pcc_matches_mxnet_on_growing_class_counts():
    from mxkit import ndarray as nd

    reference = json.loads((FIXTURES / "mxnet_pcc.json").read_text())
    pcc = metric.create("pcc")
    for batch, expected in zip(reference["batches"], reference["pcc_after_each_batch"]):
        pcc.update([nd.array(batch["labels"])], [nd.array(batch["scores"])])
        assert pcc.get()[1] == pytest.approx(expected, rel=1e-12)
    assert pcc.get_global()[1] == pytest.approx(reference["pcc_after_each_batch"][-1], rel=1e-12)
    pcc.reset_local()
    assert np.isnan(pcc.get()[1]) and not np.isnan(pcc.get_global()[1])


def test_pcc_of_two_classes_is_micro_mcc_and_class_indices_work():
    rng = np.random.default_rng(0)
    pcc, mcc = metric.create("pcc"), metric.create("mcc", average="micro")
    for _ in range(3):
        scores, labels = rng.uniform(size=(10, 2)), rng.integers(0, 2, 10)
        pcc.update([labels], [scores])
        mcc.update([labels], [scores])
    assert pcc.get()[1] == pytest.approx(mcc.get()[1], rel=1e-12)
    perfect = metric.create("pcc")
    perfect.update([np.array([0, 1, 2, 2])], [np.array([0, 1, 2, 2])])  # class indices shaped like the labels
    assert perfect.get()[1] == pytest.approx(1.0)
    assert np.isnan(multiclass_pcc(np.array([[3, 0], [0, 0]])))  # one class only: undefined, as in MXNet


@pytest.mark.parametrize("name, kwargs", [("acc", {"axis": 0}), ("f1", {}), ("mcc", {}), ("pcc", {}),
                                          ("perplexity", {"ignore_label": -1}), ("pearsonr", {}), ("loss", {})])
def test_create_rebuilds_a_metric_from_its_json_config(name, kwargs):
    original = metric.create(name, **kwargs)
    assert metric.create(json.dumps(original.get_config())).get_config() == original.get_config()


def test_create_takes_composites_and_name_kwargs_pairs_as_json():
    composite = metric.create(["acc", "f1"])
    assert metric.create(json.dumps(composite.get_config())).get_config() == composite.get_config()
    assert metric.create('["acc", {"axis": 0}]').axis == 0
    with pytest.raises(UnknownNameError, match="must be JSON"):
        metric.create("{not json")
    with pytest.raises(UnknownNameError, match="takes its arguments from the string"):
        metric.create('["acc", {}]', 3)
    with pytest.raises(UnknownNameError, match="must be a config"):
        metric.create('[1, 2, 3]')


def test_perplexity_clips_out_of_range_labels_as_mxnets_pick():
    probs = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    perplexity = metric.create("perplexity", ignore_label=-1)
    perplexity.update([np.array([5, 1, -1])], [probs])  # 5 reads class 1; -1 is ignored
    expected = np.exp(-(np.log(0.8) + np.log(0.4)) / 2)
    assert perplexity.get()[1] == pytest.approx(expected, rel=1e-12)
