"""Callbacks: MXNet's log formats, checkpoint periods, the terminal progress bar, early stopping."""

from __future__ import annotations

import io
import logging
import re
import sys
import types
from collections import namedtuple

import numpy as np
import pytest
from mxkit import mx
from mxkit.train._registry import TrainingValueError
from mxkit.train.callback import terminal as progress_module

# MXNet's mx.model.BatchEndParam
BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def _accuracy(correct, total):
    metric = mx.metric.Accuracy()
    metric.sum_metric, metric.num_inst = correct, total
    metric.global_sum_metric, metric.global_num_inst = correct, total
    return metric


class FakeClock:
    def __init__(self, start=100.0):
        self.now = start

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr("mxkit.train.callback.basic.time.time", fake)
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


def test_speedometer_logs_mxnets_format_and_resets(caplog, clock):
    caplog.set_level(logging.INFO, logger="mxkit.train")
    speedometer = mx.callback.Speedometer(batch_size=32, frequent=2)
    metric = _accuracy(3, 4)
    for nbatch in range(5):
        clock.now += 0.5
        speedometer(BatchEndParam(epoch=1, nbatch=nbatch, eval_metric=metric, locals=None))
    lines = [r.getMessage() for r in caplog.records]
    # the first call starts the clock (t=100.5); batch 2 reports at t=101.5, batch 4 at t=102.5
    assert lines == ["Epoch[1] Batch [0-2]\tSpeed: 64.00 samples/sec\taccuracy=0.750000",
                     "Epoch[1] Batch [2-4]\tSpeed: 64.00 samples/sec\taccuracy=nan"]
    assert metric.num_inst == 0 and metric.global_num_inst == 4  # reset_local only
    assert speedometer.last_speed == pytest.approx(64.0)


def test_speedometer_without_reset_and_without_metric(caplog, clock):
    caplog.set_level(logging.INFO, logger="mxkit.train")
    keep = mx.callback.Speedometer(batch_size=10, frequent=1, auto_reset=False)
    plain = mx.callback.Speedometer(batch_size=10, frequent=1)
    metric = _accuracy(1, 2)
    for nbatch in range(2):
        clock.now += 1.0
        keep(BatchEndParam(0, nbatch, metric, None))
        plain(BatchEndParam(0, nbatch, None, None))
    assert [r.getMessage() for r in caplog.records] == [
        "Epoch[0] Batch [0-1]\tSpeed: 10.00 samples/sec\taccuracy=0.500000",
        "Iter[0] Batch [1]\tSpeed: 10.00 samples/sec"]
    assert metric.num_inst == 2
    # a new epoch (batch count going down) restarts the clock instead of reporting
    caplog.clear()
    keep(BatchEndParam(1, 0, metric, None))
    assert caplog.records == []


def test_log_train_metric_and_validation_logging(caplog):
    caplog.set_level(logging.INFO, logger="mxkit.train")
    metric = _accuracy(1, 4)
    callback = mx.callback.log_train_metric(period=3, auto_reset=True)
    for nbatch in range(4):
        callback(BatchEndParam(2, nbatch, metric, None))
    mx.callback.LogValidationMetricsCallback()(BatchEndParam(2, 0, _accuracy(1, 2), None))
    assert [r.getMessage() for r in caplog.records] == [
        "Iter[2] Batch[0] Train-accuracy=0.250000", "Iter[2] Batch[3] Train-accuracy=nan",
        "Epoch[2] Validation-accuracy=0.500000"]


def test_progress_bar_mxnet_format(caplog):
    caplog.set_level(logging.INFO, logger="mxkit.train")
    bar = mx.callback.ProgressBar(total=4, length=8)
    bar(BatchEndParam(0, 1, None, None))
    bar(BatchEndParam(0, 3, None, None))
    assert [r.getMessage() for r in caplog.records] == ["[==------] 25%\r", "[======--] 75%\r"]


def test_do_checkpoint_calls_save_checkpoint_every_period(monkeypatch):
    saved = []
    fake = types.ModuleType("mxkit.train.model")
    fake.save_checkpoint = lambda prefix, epoch, sym, arg, aux: saved.append((prefix, epoch, sym, arg, aux))
    monkeypatch.setitem(sys.modules, "mxkit.train.model", fake)
    callback = mx.callback.do_checkpoint("run/model", period=2)
    for epoch in range(5):
        callback(epoch, "sym", {"w": 1}, {})
    assert saved == [("run/model", 2, "sym", {"w": 1}, {}), ("run/model", 4, "sym", {"w": 1}, {})]
    every = mx.callback.do_checkpoint("m", period=0)  # MXNet: below 1 counts as 1
    every(0, None, {}, {})
    assert saved[-1][:2] == ("m", 1)
    with pytest.raises(TrainingValueError, match="prefix must be a non-empty string"):
        mx.callback.do_checkpoint("")


def test_do_checkpoint_writes_mxnet_files(tmp_path):
    model = pytest.importorskip("mxkit.train.model")
    if not hasattr(model, "load_checkpoint"):
        pytest.skip("mxkit.train.model has no load_checkpoint yet")
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    args = {"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.zeros((2,))}
    prefix = str(tmp_path / "net")
    mx.callback.do_checkpoint(prefix)(0, net, args, {})
    assert (tmp_path / "net-symbol.json").exists() and (tmp_path / "net-0001.params").exists()
    _, loaded_args, _ = model.load_checkpoint(prefix, 1)
    np.testing.assert_array_equal(loaded_args["fc_weight"].asnumpy(), np.ones((2, 3)))


def test_module_checkpoint_calls_the_module():
    calls = []

    class Module:
        def save_checkpoint(self, prefix, epoch, save_optimizer_states):
            calls.append((prefix, epoch, save_optimizer_states))

    callback = mx.callback.module_checkpoint(Module(), "p", period=3, save_optimizer_states=True)
    for epoch in range(6):
        callback(epoch)
    assert calls == [("p", 3, True), ("p", 6, True)]


# ---- the terminal progress bar ----------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _frames(text):
    return [frame for frame in re.split(r"[\r\n]", text) if frame]


def test_terminal_progress_bar_draws_per_epoch(clock):
    out = Terminal()
    bar = mx.callback.TerminalProgressBar(total=4, batch_size=8, file=out, min_interval=0.0)
    metric = _accuracy(3, 4)
    for epoch in range(2):
        for nbatch in range(4):
            clock.now += 0.5
            bar(BatchEndParam(epoch, nbatch, metric, None))
        bar.epoch_end(epoch, None, None, None)
    lines = out.getvalue().split("\n")
    assert len(lines) == 3 and lines[2] == ""  # one finished line per epoch
    last = _frames(lines[0])[-1].rstrip()
    # the clock starts after the first batch: 3 more batches in 1.5 s
    assert last.startswith("Epoch 0: 100%|█████████████████████████| 4/4 [00:01<00:00, 2.0 batch/s")
    assert "16 samples/s" in last and "accuracy=0.75" in last
    first_epoch1 = _frames(lines[1])[0]
    assert first_epoch1.startswith("Epoch 1:  25%|██████▎")


def test_terminal_progress_bar_starts_a_new_line_without_epoch_end(clock):
    out = Terminal()
    bar = mx.callback.TerminalProgressBar(file=out, min_interval=0.0)
    for epoch in range(2):
        for nbatch in range(3):
            clock.now += 1.0
            bar(BatchEndParam(epoch, nbatch, None, None))
    bar.epoch_end()
    lines = [line for line in out.getvalue().split("\n") if line]
    assert len(lines) == 2
    assert _frames(lines[1])[-1].startswith("Epoch 1: 3 batch [00:02, 1.0 batch/s]")


def test_progress_is_silent_off_a_terminal(clock):
    captured = io.StringIO()  # not a terminal: a log file or a pipe
    bar = mx.callback.TerminalProgressBar(total=2, file=captured)
    for nbatch in range(2):
        bar(BatchEndParam(0, nbatch, None, None))
    bar.epoch_end()
    assert captured.getvalue() == "" and not bar.active
    forced = io.StringIO()
    items = list(mx.callback.progress(range(3), desc="load", file=forced, enabled=True))
    assert items == [0, 1, 2]
    assert _frames(forced.getvalue())[-1].startswith("load: 100%|")
    assert list(mx.callback.progress(iter([5, 6]), file=io.StringIO())) == [5, 6]


def test_progress_line_throttles_redraws(clock):
    out = Terminal()
    line = mx.callback.ProgressLine(total=100, file=out, min_interval=1.0)
    for step in range(1, 51):
        clock.now += 0.1
        line.update(step)
    # drawn at the first update and then about once a second of the 5 seconds
    assert 5 <= len(_frames(out.getvalue())) <= 7
    line.close()
    assert out.getvalue().endswith("\n")
    with pytest.raises(TrainingValueError, match="total must be a non-negative int"):
        mx.callback.ProgressLine(total=-1)


def test_format_interval():
    assert progress_module.format_interval(5) == "00:05"
    assert progress_module.format_interval(3725) == "1:02:05"


# ---- early stopping --------------------------------------------------------------------------------


def _feed(stopper, values, name="accuracy", start=0):
    decisions = []
    for epoch, value in enumerate(values, start=start):
        metric = mx.metric.CustomMetric(lambda label, pred: 0.0, name=name)
        metric.sum_metric, metric.num_inst = value, 1
        stopper(BatchEndParam(epoch, 0, metric, None))
        decisions.append(stopper.stop_training)
    return decisions


def test_early_stopping_on_a_rising_metric():
    stopper = mx.callback.EarlyStopping(monitor="accuracy", patience=2, min_delta=0.01)
    decisions = _feed(stopper, [0.5, 0.6, 0.605, 0.61, 0.7])
    # 0.605 and 0.61 do not beat 0.6 by more than 0.01: the second of them ends training
    assert decisions == [False, False, False, True, True]
    assert stopper.best == 0.6 and stopper.best_epoch == 1 and stopper.stopped_epoch == 3


def test_early_stopping_auto_mode_minimises_losses_and_can_raise():
    stopper = mx.callback.EarlyStopping(patience=1, raise_on_stop=True)
    _feed(stopper, [1.0, 0.8], name="cross-entropy")
    assert stopper.best == 0.8
    with pytest.raises(mx.callback.StopTraining, match="early stopping at epoch 2"):
        _feed(stopper, [0.9, 0.85], name="cross-entropy", start=2)
    with_baseline = mx.callback.EarlyStopping(patience=0, mode="max", baseline=0.9)
    assert _feed(with_baseline, [0.8]) == [True]
    stopper.reset()
    assert not stopper.stop_training and stopper.best_epoch == -1


def test_early_stopping_bad_inputs():
    with pytest.raises(TrainingValueError, match="mode='largest'"):
        mx.callback.EarlyStopping(mode="largest")
    with pytest.raises(TrainingValueError, match="patience must be a non-negative int, got -1"):
        mx.callback.EarlyStopping(patience=-1)
    stopper = mx.callback.EarlyStopping(monitor="f1")
    with pytest.raises(TrainingValueError, match=r"monitor='f1' is not among the metric's names \['accuracy'\]"):
        _feed(stopper, [0.5])


@pytest.mark.parametrize(("build", "message"), [
    (lambda: mx.callback.Speedometer(0), "batch_size must be a positive int, got 0"),
    (lambda: mx.callback.Speedometer(32, frequent=0), "frequent must be a positive int"),
    (lambda: mx.callback.ProgressBar(total=0), "total must be a positive int"),
    (lambda: mx.callback.log_train_metric(0), "period must be a positive int"),
])
def test_bad_callback_arguments(build, message):
    with pytest.raises(TrainingValueError, match=message):
        build()
