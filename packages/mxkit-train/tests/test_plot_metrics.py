"""mx.callback.PlotMetrics: one PNG per metric, rewritten each epoch, holding exactly what fit measured."""

from __future__ import annotations

import sys
from collections import namedtuple

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MissingComponentError
from mxkit.train._registry import TrainingValueError
from mxkit.train.callback.plot_metrics import file_name_of, metric_series

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def _data(count, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    return x, y


def _mlp():
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=8, name="fc1")
    net = mx.sym.FullyConnected(mx.sym.Activation(net, act_type="relu"), num_hidden=2, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_fit_with_plot_metrics_writes_two_point_curves_equal_to_what_fit_measured(tmp_path):
    pytest.importorskip("matplotlib")
    x, y = _data(32)
    vx, vy = _data(16, seed=1)
    plot = mx.callback.PlotMetrics(tmp_path / "curves")
    seen_validation, seen_train = [], []

    def record_train(param):  # an independent reading of fit's training metric at each epoch's last batch
        if param.nbatch == 3:
            seen_train.append(dict(param.eval_metric.get_global_name_value()))

    module = mx.mod.Module(_mlp())
    module.fit(mx.io.NDArrayIter(x, y, 8), eval_data=mx.io.NDArrayIter(vx, vy, 8), num_epoch=2,
               eval_metric=mx.metric.create(["acc", "ce"]), optimizer_params={"learning_rate": 0.5},
               batch_end_callback=[record_train, plot],
               eval_end_callback=[plot, lambda p: seen_validation.append(dict(p.eval_metric.get_name_value()))])
    assert sorted(plot.paths) == ["accuracy", "cross-entropy"]
    for name in ("accuracy", "cross-entropy"):
        path = tmp_path / "curves" / f"{name}.png"
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 2000
        series = plot.series(name)
        assert series.train_epochs == (0, 1) and series.validation_epochs == (0, 1)
        assert series.train_values == pytest.approx([seen[name] for seen in seen_train])
        assert series.validation_values == pytest.approx([seen[name] for seen in seen_validation])
    # the last validation point is the trained module's score
    ((_, accuracy),) = module.score(mx.io.NDArrayIter(vx, vy, 8), "acc")
    assert plot.series("accuracy").validation_values[-1] == pytest.approx(accuracy)
    assert not list((tmp_path / "curves").glob("*.partial"))


def test_the_file_is_redrawn_each_epoch(tmp_path):
    pytest.importorskip("matplotlib")
    plot = mx.callback.PlotMetrics(tmp_path, metrics=["accuracy"])
    plot.update(0, train={"accuracy": 0.5, "ignored": 1.0})
    first = (tmp_path / "accuracy.png").read_bytes()
    plot.update(1, train=[("accuracy", 0.75)], validation={"accuracy": 0.7})
    assert (tmp_path / "accuracy.png").read_bytes() != first
    assert not (tmp_path / "ignored.png").exists()
    assert plot.series("accuracy").train_values == (0.5, 0.75)


def test_epoch_end_commits_the_training_metric_when_batch_end_has_no_locals(tmp_path):
    pytest.importorskip("matplotlib")
    plot = mx.callback.PlotMetrics(tmp_path)
    metric = mx.metric.Accuracy()
    metric.update([mx.nd.array([1, 0])], [mx.nd.array([[0.2, 0.8], [0.4, 0.6]])])
    plot(BatchEndParam(epoch=0, nbatch=0, eval_metric=metric, locals=None))  # MXNet-style, no locals
    assert plot.series("accuracy").train_epochs == ()
    plot(0, None, {}, {})  # the epoch_end_callback signature
    assert plot.series("accuracy").train_values == (0.5,)
    assert (tmp_path / "accuracy.png").exists()


def test_metric_series_sorts_by_epoch_and_keeps_kinds_apart():
    history = {"train": {"acc": {2: 0.9, 0: 0.1, 1: 0.5}}, "validation": {"acc": {1: 0.4}}}
    series = metric_series(history, "acc")
    assert (series.train_epochs, series.train_values) == ((0, 1, 2), (0.1, 0.5, 0.9))
    assert (series.validation_epochs, series.validation_values) == ((1,), (0.4,))
    assert metric_series(history, "missing").train_epochs == ()


@pytest.mark.parametrize("name, expected", [("accuracy", "accuracy.png"), ("cross-entropy", "cross-entropy.png"),
                                            ("top k/5", "top_k_5.png"), ("../x", "x.png"), ("..", "metric.png")])
def test_file_names_stay_in_the_directory(name, expected):
    assert file_name_of(name) == expected


def test_without_matplotlib_the_error_says_which_extra_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    plot = mx.callback.PlotMetrics(tmp_path)
    with pytest.raises(MissingComponentError, match=r"pip install 'mxkit-train\[plot\]'"):
        plot.update(0, train={"accuracy": 0.5})


def test_bad_inputs_say_what_is_wrong(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(TrainingValueError, match="is not a folder"):
        mx.callback.PlotMetrics(a_file)
    with pytest.raises(TrainingValueError, match="directory must be a folder path"):
        mx.callback.PlotMetrics("")
    plot = mx.callback.PlotMetrics(tmp_path)
    with pytest.raises(TrainingValueError, match="epoch must be an int >= 0, got -1"):
        plot.update(-1, train={"accuracy": 0.5})
    with pytest.raises(TrainingValueError, match="called with 2 arguments"):
        plot(1, 2)


def test_curves_count_epochs_from_one_as_the_console_and_share_one_figure(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from mxkit.train.callback.plot_metrics import draw_metric_series

    plot = mx.callback.PlotMetrics(tmp_path)
    plot.update(0, train={"accuracy": 0.5, "cross-entropy": 1.2}, validation={"accuracy": 0.4})
    plot.update(1, train={"accuracy": 0.7, "cross-entropy": 0.8}, validation={"accuracy": 0.6})
    assert plot.combined_path == str(tmp_path / "all-metrics.png")
    assert (tmp_path / "all-metrics.png").read_bytes().startswith(PNG_SIGNATURE)
    ax = Figure().add_subplot()
    draw_metric_series(plot.series("accuracy"), ax)
    assert [list(line.get_xdata()) for line in ax.get_lines()] == [[1, 2], [1, 2]]  # "epoch 1/2", "epoch 2/2"
    assert file_name_of("all-metrics") != "all-metrics.png"  # a metric never overwrites the combined figure
