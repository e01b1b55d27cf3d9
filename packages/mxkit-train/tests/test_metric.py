"""Metrics against hand computations and against MXNet 1.9.1's values on the same inputs."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import mx
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError, UnknownNameError

FIXTURES = Path(__file__).parent / "fixtures"

PROBS = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.35, 0.4, 0.25]], dtype=np.float32)
LABELS = np.array([1, 2, 2, 0], dtype=np.float32)


def test_accuracy_by_hand():
    metric = mx.metric.Accuracy()
    metric.update([mx.nd.array(LABELS)], [mx.nd.array(PROBS)])
    assert metric.get() == ("accuracy", 0.5)  # rows 0 and 2 are right
    metric.update([LABELS[:2]], [np.array([1, 2])])  # class indices, numpy arrays
    assert metric.get()[1] == pytest.approx(4 / 6)
    assert metric.num_inst == 6 and metric.sum_metric == 4
    columns = mx.metric.Accuracy(axis=0)
    columns.update(mx.nd.array([1, 2, 2]), mx.nd.array(PROBS[:3].T))  # single arrays count as lists of one
    assert columns.get()[1] == pytest.approx(2 / 3)


def test_local_and_global_sums():
    metric = mx.metric.create("acc")
    metric.update([LABELS], [PROBS])
    metric.reset_local()
    assert math.isnan(metric.get()[1])
    metric.update([np.array([0.0])], [np.array([[0.9, 0.1, 0.0]])])
    assert metric.get() == ("accuracy", 1.0)
    assert metric.get_global() == ("accuracy", pytest.approx(3 / 5))
    assert metric.global_num_inst == 5 and metric.global_sum_metric == 3
    assert metric.get_name_value() == [("accuracy", 1.0)]
    assert metric.get_global_name_value() == [("accuracy", pytest.approx(0.6))]
    metric.reset()
    assert math.isnan(metric.get_global()[1])
    assert "accuracy" in str(metric)


def test_top_k_by_hand():
    metric = mx.metric.TopKAccuracy(top_k=2)
    metric.update([LABELS], [PROBS])
    # the two best classes of each row: {1, 2}, {0, 1}, {2, 0 or 1}, {1, 0}; labels 1, 2, 2, 0
    assert metric.get() == ("top_k_accuracy_2", 0.75)
    everything = mx.metric.create("top_k_acc", top_k=5)
    everything.update([LABELS], [PROBS])
    assert everything.get()[1] == 1.0


def _binary_counts(labels, scores):
    predicted = scores.argmax(axis=1)
    tp = int(((predicted == 1) & (labels == 1)).sum())
    fp = int(((predicted == 1) & (labels == 0)).sum())
    fn = int(((predicted == 0) & (labels == 1)).sum())
    tn = int(((predicted == 0) & (labels == 0)).sum())
    return tp, fp, fn, tn


def _f1(tp, fp, fn, tn):
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return 2 * precision * recall / (precision + recall)


def _mcc(tp, fp, fn, tn):
    return (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))


BATCH1 = (np.array([1, 0, 1, 1, 0, 0]), np.array([[0.2, 0.8], [0.6, 0.4], [0.7, 0.3], [0.1, 0.9], [0.3, 0.7],
                                                 [0.9, 0.1]]))
BATCH2 = (np.array([0, 1, 1, 0]), np.array([[0.4, 0.6], [0.2, 0.8], [0.55, 0.45], [0.8, 0.2]]))


@pytest.mark.parametrize(("klass", "score"), [("F1", _f1), ("MCC", _mcc)])
def test_binary_metrics_macro_and_micro(klass, score):
    c1, c2 = _binary_counts(*BATCH1), _binary_counts(*BATCH2)
    macro = getattr(mx.metric, klass)(average="macro")
    micro = getattr(mx.metric, klass)(average="micro")
    for metric in (macro, micro):
        for labels, scores in (BATCH1, BATCH2):
            metric.update([mx.nd.array(labels)], [mx.nd.array(scores)])
    assert macro.get()[1] == pytest.approx((score(*c1) + score(*c2)) / 2)
    assert micro.get()[1] == pytest.approx(score(*(a + b for a, b in zip(c1, c2))))
    micro.reset_local()
    micro.update([BATCH2[0]], [BATCH2[1]])
    assert micro.get()[1] == pytest.approx(score(*c2))
    assert micro.get_global()[1] == pytest.approx(score(*(a + 2 * b for a, b in zip(c1, c2))))


def test_binary_metric_degenerate_cases():
    f1 = mx.metric.F1()
    f1.update([np.array([0, 0])], [np.array([[0.9, 0.1], [0.8, 0.2]])])
    assert f1.get()[1] == 0.0  # no positives at all: MXNet's convention is 0
    mcc = mx.metric.MCC()
    mcc.update([np.array([1, 0])], [np.array([[0.1, 0.9], [0.2, 0.8]])])
    assert mcc.get()[1] == 0.0
    with pytest.raises(TrainingValueError, match=r"only binary classification.*\[0, 1, 2\]"):
        f1.update([np.array([0, 1, 2])], [np.ones((3, 2))])
    with pytest.raises(TrainingValueError, match="average='weighted'"):
        mx.metric.F1(average="weighted")


def test_cross_entropy_nll_perplexity_by_hand():
    picked = PROBS[np.arange(4), LABELS.astype(int)].astype(np.float64)
    for name in ("ce", "nll_loss"):
        metric = mx.metric.create(name)
        metric.update([LABELS], [PROBS])
        assert metric.get()[1] == pytest.approx(-np.log(picked + 1e-12).mean())
    perplexity = mx.metric.Perplexity(ignore_label=None)
    perplexity.update([LABELS], [PROBS])
    assert perplexity.get()[1] == pytest.approx(math.exp(-np.log(picked).mean()))
    ignoring = mx.metric.Perplexity(ignore_label=2)
    ignoring.update([LABELS], [PROBS])
    kept = picked[LABELS != 2]
    assert ignoring.get()[1] == pytest.approx(math.exp(-np.log(kept).sum() / kept.size))
    # the class axis can be another one: (batch, classes, time)
    sequence = np.stack([PROBS, PROBS[::-1]], axis=2)
    labels = np.stack([LABELS, LABELS[::-1]], axis=1)
    along = mx.metric.Perplexity(ignore_label=None, axis=1)
    along.update([labels], [sequence])
    assert along.get()[1] == pytest.approx(math.exp(-np.log(picked).mean()))


def test_regression_metrics_average_per_batch():
    label1, pred1 = np.array([1.0, 2.0, 3.0]), np.array([[1.5], [2.0], [2.0]])
    label2, pred2 = np.array([0.0, 4.0]), np.array([1.0, 1.0])
    d1, d2 = label1 - pred1[:, 0], label2 - pred2
    expected = {
        "mae": (np.abs(d1).mean() + np.abs(d2).mean()) / 2,
        "mse": ((d1 ** 2).mean() + (d2 ** 2).mean()) / 2,
        "rmse": (np.sqrt((d1 ** 2).mean()) + np.sqrt((d2 ** 2).mean())) / 2,
    }
    for name, value in expected.items():
        metric = mx.metric.create(name)
        metric.update([mx.nd.array(label1)], [mx.nd.array(pred1)])
        metric.update([label2], [pred2])
        assert metric.get() == (name, pytest.approx(value)), name


def test_pearson_macro_and_micro():
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=7), rng.normal(size=7)) for _ in range(3)]
    batches = [(label, label * 0.5 + pred) for label, pred in batches]
    macro = mx.metric.create("pearsonr")
    micro = mx.metric.PearsonCorrelation(average="micro")
    for label, pred in batches:
        macro.update([label], [pred])
        micro.update([mx.nd.array(label)], [mx.nd.array(pred)])
    assert macro.get()[1] == pytest.approx(np.mean([np.corrcoef(p, lab)[0, 1] for lab, p in batches]))
    all_labels = np.concatenate([b[0] for b in batches])
    all_preds = np.concatenate([b[1] for b in batches])
    assert micro.get()[1] == pytest.approx(np.corrcoef(all_labels, all_preds)[0, 1])
    with pytest.raises(ShapeError, match="shape of labels"):
        macro.update([np.zeros(3)], [np.zeros((3, 1))])


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(2, 9), min_size=1, max_size=5), seed=st.integers(0, 2 ** 16))
def test_streaming_pearson_equals_the_correlation_of_everything(sizes, seed):
    rng = np.random.default_rng(seed)
    labels = rng.normal(size=sum(sizes))
    preds = 0.3 * labels + rng.normal(size=labels.size)
    metric = mx.metric.PearsonCorrelation(average="micro")
    start = 0
    for size in sizes:
        metric.update([labels[start:start + size]], [preds[start:start + size]])
        start += size
    assert metric.get()[1] == pytest.approx(np.corrcoef(labels, preds)[0, 1], rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 20), classes=st.integers(2, 6), seed=st.integers(0, 2 ** 16))
def test_accuracy_and_top_k_count_like_numpy(batch, classes, seed):
    rng = np.random.default_rng(seed)
    scores = rng.random((batch, classes))
    labels = rng.integers(0, classes, batch)
    accuracy, top2 = mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=2)
    accuracy.update([labels], [scores])
    top2.update([labels], [scores])
    assert accuracy.get()[1] == pytest.approx(np.mean(scores.argmax(1) == labels))
    ranks = (scores > scores[np.arange(batch), labels][:, None]).sum(1)  # classes scoring above the label's
    assert top2.get()[1] == pytest.approx(np.mean(ranks < 2))


def test_loss_metric_is_the_mean_output():
    metric = mx.metric.Loss()
    metric.update(None, [mx.nd.array([1.0, 2.0, 3.0])])
    metric.update(None, mx.nd.array([[6.0]]))
    assert metric.get() == ("loss", pytest.approx(3.0))


PEARSON_INPUTS = ("regress_label", "regress_pred_flat")
MXNET_RUNS = {
    "acc": ("Accuracy", {}, [("labels", "probs")]),
    "top2": ("TopKAccuracy", {"top_k": 2}, [("labels", "probs")]),
    "top3": ("TopKAccuracy", {"top_k": 3}, [("labels", "probs")]),
    "f1_macro": ("F1", {"average": "macro"}, [("binary_labels", "binary_probs"), ("binary_labels2", "binary_probs2")]),
    "f1_micro": ("F1", {"average": "micro"}, [("binary_labels", "binary_probs"), ("binary_labels2", "binary_probs2")]),
    "mcc_macro": ("MCC", {"average": "macro"}, [("binary_labels", "binary_probs"),
                                                ("binary_labels2", "binary_probs2")]),
    "mcc_micro": ("MCC", {"average": "micro"}, [("binary_labels", "binary_probs"),
                                                ("binary_labels2", "binary_probs2")]),
    "ce": ("CrossEntropy", {}, [("labels", "probs")]),
    "nll": ("NegativeLogLikelihood", {}, [("labels", "probs")]),
    "perplexity": ("Perplexity", {"ignore_label": None}, [("labels", "probs")]),
    "perplexity_ignore2": ("Perplexity", {"ignore_label": 2}, [("perplexity_labels", "probs")]),
    "mae": ("MAE", {}, [("regress_label", "regress_pred")]),
    "mse": ("MSE", {}, [("regress_label", "regress_pred")]),
    "rmse": ("RMSE", {}, [("regress_label", "regress_pred")]),
    "pearsonr": ("PearsonCorrelation", {}, [PEARSON_INPUTS]),
}


@pytest.mark.parametrize("case", sorted(MXNET_RUNS))
def test_matches_mxnet(case):
    expected = json.loads((FIXTURES / "mxnet_reference.json").read_text())["metrics"][case]
    arrays = np.load(FIXTURES / "mxnet_optimizers.npz", allow_pickle=False)
    klass, kwargs, batches = MXNET_RUNS[case]
    metric = getattr(mx.metric, klass)(**kwargs)
    for label, pred in batches:
        metric.update([mx.nd.array(arrays[f"metric/{label}"])], [mx.nd.array(arrays[f"metric/{pred}"])])
    assert metric.get()[1] == pytest.approx(expected, rel=1e-6)


def test_composite_and_create_forms():
    composite = mx.metric.create(["acc", mx.metric.CrossEntropy(), "top_k_accuracy"])
    assert isinstance(composite, mx.metric.CompositeEvalMetric)
    composite.update([LABELS], [PROBS])
    names, values = composite.get()
    assert names == ["accuracy", "cross-entropy", "top_k_accuracy_1"]
    assert values[0] == values[2] == 0.5
    composite.reset_local()
    assert all(math.isnan(v) for v in composite.get()[1])
    assert composite.get_global()[1][0] == 0.5
    assert composite.get_metric(1).name == "cross-entropy"
    with pytest.raises(TrainingValueError, match="index 5 is out of range"):
        composite.get_metric(5)
    rebuilt = mx.metric.create(**composite.get_config())
    assert [m.name for m in rebuilt.metrics] == names
    acc = mx.metric.Accuracy(axis=2, name="acc2")
    again = mx.metric.create(**acc.get_config())
    assert type(again) is mx.metric.Accuracy and again.axis == 2 and again.name == "acc2"


def test_update_dict_uses_the_named_outputs():
    metric = mx.metric.Accuracy(output_names=["softmax_output"], label_names=["softmax_label"])
    metric.update_dict(OrderedDict(softmax_label=mx.nd.array(LABELS), other=mx.nd.zeros((4,))),
                       OrderedDict(aux=mx.nd.zeros((4, 3)), softmax_output=mx.nd.array(PROBS)))
    assert metric.get()[1] == 0.5
    composite = mx.metric.CompositeEvalMetric(["acc"], label_names=["softmax_label"],
                                              output_names=["softmax_output"])
    composite.update_dict(OrderedDict(softmax_label=LABELS, other=np.zeros(4)),
                          OrderedDict(softmax_output=PROBS))
    assert composite.get()[1] == [0.5]


def test_custom_metrics():
    def mean_abs(label, pred):
        return float(np.abs(label - pred).mean())

    metric = mx.metric.create(mean_abs)
    assert metric.name == "mean_abs"
    metric.update([mx.nd.array([1.0, 2.0])], [mx.nd.array([1.5, 2.5])])
    metric.update([np.array([0.0])], [np.array([2.0])])
    assert metric.get() == ("mean_abs", pytest.approx(1.25))
    summed = mx.metric.np(lambda label, pred: (float((label == pred).sum()), label.size))
    assert summed.name == "custom(<lambda>)"
    summed.update([np.array([1, 2, 3])], [np.array([1, 0, 3])])
    assert summed.get()[1] == pytest.approx(2 / 3)
    extra = mx.metric.CustomMetric(mean_abs, allow_extra_outputs=True)
    extra.update([np.array([1.0])], [np.array([1.0]), np.array([5.0])])
    assert extra.get()[1] == 0.0
    with pytest.raises(TrainingValueError, match="cannot be described"):
        metric.get_config()
    bad = mx.metric.np(lambda label, pred: (1.0, 2.0, 3.0))
    with pytest.raises(TrainingValueError, match="tuple of 3"):
        bad.update([np.zeros(1)], [np.zeros(1)])


def test_register_a_metric():
    @mx.metric.register
    @mx.metric.alias("always_one")
    class AlwaysOne(mx.metric.EvalMetric):
        def __init__(self, name="always-one"):
            super().__init__(name)

        def update(self, labels, preds):
            self._add(1.0, 1)

    try:
        metric = mx.metric.create("always_one")
        metric.update([], [])
        assert metric.get() == ("always-one", 1.0)
    finally:
        from mxkit.train.metric.base import _METRICS

        del _METRICS["alwaysone"], _METRICS["always_one"]


def test_bad_inputs_are_clear_errors():
    with pytest.raises(UnknownNameError, match=r"unknown metric 'accuracyy'.*did you mean accuracy.*choices"):
        mx.metric.create("accuracyy")
    with pytest.raises(UnknownNameError, match="registered names"):
        mx.metric.create(3)
    with pytest.raises(ShapeError, match=r"number of labels 2 does not match number of predictions 1"):
        mx.metric.Accuracy().update([LABELS, LABELS], [PROBS])
    with pytest.raises(ShapeError, match="4 labels but 3 predicted classes"):
        mx.metric.Accuracy().update([LABELS], [PROBS[:3]])
    with pytest.raises(TrainingValueError, match="top_k must be an int >= 1, got 0"):
        mx.metric.TopKAccuracy(top_k=0)
    with pytest.raises(TrainingValueError, match=r"class indices in \[0, 3\), got values from 0 to 7"):
        mx.metric.CrossEntropy().update([np.array([0, 7, 1, 1])], [PROBS])
    with pytest.raises(ShapeError, match=r"3 labels and predictions of shape \(4, 3\)"):
        mx.metric.CrossEntropy().update([LABELS[:3]], [PROBS])
    with pytest.raises(ShapeError, match="5 labels for predictions of shape"):
        mx.metric.Perplexity(None).update([np.zeros(5)], [PROBS])
    with pytest.raises(TrainingValueError, match="needs a function"):
        mx.metric.CustomMetric(42)
    with pytest.raises(TrainingValueError, match="only subclasses of EvalMetric"):
        mx.metric.register(object)
