"""gluon.contrib.estimator: a real training run on the bundled digits, checkpoints that load
back, resuming, early stopping, custom handlers and batch processors, and the errors of bad
arguments."""

import logging
import os
import warnings

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import Trainer, data, loss, nn
from mxkit.gluon.contrib.estimator import (
    BatchEnd,
    BatchProcessor,
    CheckpointHandler,
    EarlyStoppingHandler,
    EpochEnd,
    Estimator,
    EstimatorError,
    LoggingHandler,
    MetricHandler,
    TrainBegin,
    UnavailableDeviceError,
    ValidationHandler,
)


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits as float32 (train_x, train_y, val_x, val_y), pixels in [0, 1]."""
    datasets = pytest.importorskip("sklearn.datasets", reason="the digits come with scikit-learn")
    bunch = datasets.load_digits()
    images = (bunch.images / 16.0).astype(np.float32).reshape(len(bunch.images), -1)
    labels = bunch.target.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(images))
    cut = int(len(images) * 0.8)
    return images[order[:cut]], labels[order[:cut]], images[order[cut:]], labels[order[cut:]]


def _loader(x, y, batch_size=64, shuffle=False):
    return data.DataLoader(data.ArrayDataset(mx.nd.array(x), mx.nd.array(y)), batch_size=batch_size, shuffle=shuffle)


def _mlp(hybrid=True):
    net = nn.HybridSequential() if hybrid else nn.Sequential()
    with net.name_scope():
        net.add(nn.Dense(32, activation="relu"), nn.Dense(10))
    return net


def _quiet(est):
    est.logger.handlers.clear()
    est.logger.addHandler(logging.NullHandler())
    return est


def _small_data():
    rng = np.random.RandomState(3)
    x = rng.uniform(0, 1, (24, 5)).astype(np.float32)
    y = (x.sum(axis=1) > 2.5).astype(np.float32)
    return _loader(x, y, batch_size=8)


def _estimator(net=None, **kwargs):
    net = net or _mlp()
    net.initialize(mx.init.Xavier())
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    return _quiet(Estimator(net, loss.SoftmaxCrossEntropyLoss(), trainer=trainer, **kwargs))


def test_estimator_trains_the_digits_to_a_real_accuracy(digits):
    train_x, train_y, val_x, val_y = digits
    mx.random.seed(7)
    net = _mlp()
    net.hybridize()
    net.initialize(mx.init.Xavier())
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    est = _quiet(Estimator(net, loss.SoftmaxCrossEntropyLoss(), trainer=trainer))
    assert [m.name for m in est.train_metrics] == ["training accuracy", "training softmaxcrossentropyloss"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy", "validation softmaxcrossentropyloss"]
    est.fit(_loader(train_x, train_y, shuffle=True), val_data=_loader(val_x, val_y), epochs=8)
    train_acc = est.train_metrics[0].get()[1]
    val_acc = est.val_metrics[0].get()[1]
    assert train_acc > 0.95, train_acc
    assert val_acc > 0.93, val_acc
    # the validation metrics are what the net computes on the validation data
    pred = net(mx.nd.array(val_x)).asnumpy().argmax(axis=1)
    np.testing.assert_allclose(val_acc, (pred == val_y).mean(), rtol=1e-6)


def test_checkpoints_load_back_and_old_ones_are_removed(tmp_path):
    est = _estimator()
    est.net.hybridize()
    acc = est.train_metrics[0]
    handler = CheckpointHandler(str(tmp_path), model_prefix="m", monitor=acc, save_best=True, epoch_period=1,
                                max_checkpoints=2)
    est.fit(_small_data(), event_handlers=[handler], epochs=3)
    names = sorted(os.listdir(tmp_path))
    assert names == ["m-best.params", "m-best.states", "m-epoch1batch6.params", "m-epoch1batch6.states",
                     "m-epoch2batch9.params", "m-epoch2batch9.states", "m-symbol.json"]
    fresh = _mlp()
    fresh.load_parameters(str(tmp_path / "m-epoch2batch9.params"))
    x = mx.nd.array(np.random.RandomState(0).uniform(0, 1, (4, 5)))
    np.testing.assert_allclose(fresh(x).asnumpy(), est.net(x).asnumpy(), rtol=1e-6)
    est.trainer.load_states(str(tmp_path / "m-epoch2batch9.states"))
    graph = mx.sym.load(str(tmp_path / "m-symbol.json"))
    assert graph.list_outputs()[0].endswith("_output")


def test_resume_trains_only_the_remaining_epochs(tmp_path):
    est = _estimator()
    est.fit(_small_data(), event_handlers=[CheckpointHandler(str(tmp_path), model_prefix="r")], epochs=2)
    assert (tmp_path / "r-epoch1batch6.params").exists()
    saved = {k[len(est.net.prefix):]: v.data().asnumpy() for k, v in est.net.collect_params().items()}
    resumed = _estimator()
    seen, loaded = [], {}

    class Watch(TrainBegin, EpochEnd):
        def train_begin(self, estimator, *args, **kwargs):  # runs after the checkpoint handler's
            net = estimator.net
            loaded.update({k[len(net.prefix):]: v.data().asnumpy() for k, v in net.collect_params().items()})

        def epoch_end(self, estimator, *args, **kwargs):
            seen.append(estimator.max_epoch)

    handler = CheckpointHandler(str(tmp_path), model_prefix="r", resume_from_checkpoint=True)
    resumed.fit(_small_data(), event_handlers=[handler, Watch()], epochs=4)
    for name, value in saved.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)
    assert seen == [2, 2] and resumed.max_epoch == 2
    # numbered on from the checkpoint; the oldest files beyond max_checkpoints=5 are kept
    assert (tmp_path / "r-epoch2batch9.params").exists()
    assert (tmp_path / "r-epoch3batch12.params").exists()


def test_resume_refuses_a_finished_run(tmp_path):
    est = _estimator()
    est.fit(_small_data(), event_handlers=[CheckpointHandler(str(tmp_path), model_prefix="f")], epochs=2)
    again = _estimator()
    with pytest.raises(EstimatorError, match="already reached the 2 epochs"):
        again.fit(_small_data(), event_handlers=[CheckpointHandler(str(tmp_path), model_prefix="f",
                                                                   resume_from_checkpoint=True)], epochs=2)


def test_early_stopping_stops_when_the_monitor_does_not_improve():
    est = _estimator()
    loss_metric = est.train_metrics[1]
    stopper = EarlyStoppingHandler(monitor=loss_metric, patience=0, mode="max")  # loss falls: never "improves"
    est.fit(_small_data(), event_handlers=[stopper], epochs=10)
    assert stopper.stopped_epoch == 1 and stopper.current_epoch == 2


def test_batch_end_true_ends_the_epoch_and_epoch_end_true_ends_training():
    batches, epochs = [], []

    class StopAt(BatchEnd, EpochEnd):
        def batch_end(self, estimator, *args, **kwargs):
            batches.append(1)
            return len(batches) == 2  # ends epoch 0 after two of its three batches

        def epoch_end(self, estimator, *args, **kwargs):
            epochs.append(1)
            return len(epochs) == 2  # ends training after epoch 1

    est = _estimator()
    est.fit(_small_data(), event_handlers=[StopAt()], epochs=5)
    assert len(batches) == 2 + 3 and len(epochs) == 2


def test_fit_by_batches_crosses_epochs():
    est = _estimator()
    metric = MetricHandler(est.train_metrics)
    est.fit(_small_data(), event_handlers=[metric], batches=7)
    assert est.max_batch == 7


def test_a_custom_batch_processor_is_used():
    calls = []

    class Counting(BatchProcessor):
        def fit_batch(self, estimator, batch, batch_axis=0):
            calls.append("fit")
            return super().fit_batch(estimator, batch, batch_axis)

        def evaluate_batch(self, estimator, batch, batch_axis=0):
            calls.append("eval")
            return super().evaluate_batch(estimator, batch, batch_axis)

    est = _estimator(batch_processor=Counting())
    est.fit(_small_data(), val_data=_small_data(), epochs=1)
    assert calls == ["fit"] * 3 + ["eval"] * 3


def test_logging_handler_logs_each_interval(capsys):
    net = _mlp()
    net.initialize()
    est = Estimator(net, loss.SoftmaxCrossEntropyLoss(), trainer=Trainer(net.collect_params(), "sgd"))
    est.fit(_small_data(), event_handlers=[LoggingHandler(log_interval=2, metrics=est.train_metrics)], epochs=1)
    lines = capsys.readouterr().out.splitlines()
    batch_lines = [line for line in lines if line.startswith("[Epoch 0][Batch")]
    assert [line.split("]")[1] for line in batch_lines] == ["[Batch 0", "[Batch 2"]
    assert "[Samples 24]" in batch_lines[-1] and "training accuracy: " in batch_lines[-1]


def test_default_and_validation_handlers_use_the_estimators_metrics():
    est = _estimator()
    with pytest.raises(EstimatorError, match="not one of the estimator's metrics"):
        est.fit(_small_data(), event_handlers=[LoggingHandler(metrics=[mx.metric.Accuracy()])], epochs=1)
    handlers = est._prepare_default_handlers(None, [EarlyStoppingHandler(monitor=est.val_metrics[0])])
    kinds = [type(h).__name__ for h in handlers]
    assert kinds[0] == "GradientUpdateHandler" and kinds[1] == "MetricHandler" and kinds[-1] == "LoggingHandler"
    est.fit(_small_data(), event_handlers=[ValidationHandler(_small_data(), est.evaluate, epoch_period=1)], epochs=1)
    assert not np.isnan(est.val_metrics[0].get()[1])


def test_initialization_and_default_trainer_warnings():
    net = _mlp()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = _quiet(Estimator(net, loss.L2Loss()))
    assert any("No trainer specified" in str(w.message) for w in caught)
    assert net[0].weight.list_ctx() == [mx.cpu()]  # the estimator initialized the net
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Estimator(net, loss.L2Loss(), initializer=mx.init.Xavier(), trainer=est.trainer)
    assert any("already fully initialized" in str(w.message) for w in caught)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"loss": "mse"}, EstimatorError, "loss must be a gluon.loss.Loss"),
    ({"trainer": "sgd"}, EstimatorError, "trainer must be a gluon.Trainer"),
    ({"train_metrics": "acc"}, EstimatorError, "metrics must be an mx.metric.EvalMetric"),
    ({"context": "cpu"}, EstimatorError, "context must be a Context"),
    ({"context": [mx.gpu(100)]}, UnavailableDeviceError, "gpu\\(100\\) is not available"),
    ({"batch_processor": object()}, EstimatorError, "fit_batch\\(\\) and evaluate_batch\\(\\)"),
])
def test_bad_constructor_arguments_raise_clear_errors(kwargs, error, message):
    net = _mlp()
    arguments = {"net": net, "loss": loss.L2Loss(), "trainer": None, **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=message):
            Estimator(**arguments)


def test_bad_fit_arguments_raise_clear_errors():
    est = _estimator()
    with pytest.raises(EstimatorError, match=r"gluon\.data\.DataLoader"):
        est.fit([mx.nd.ones((4, 5))], epochs=1)
    with pytest.raises(EstimatorError, match=r"gluon\.data\.DataLoader"):
        est.fit(mx.io.NDArrayIter(np.ones((8, 5)), np.zeros(8), batch_size=4), epochs=1)
    with pytest.raises(EstimatorError, match="exactly one of epochs= and batches="):
        est.fit(_small_data(), epochs=1, batches=2)
    with pytest.raises(EstimatorError, match="exactly one of epochs= and batches="):
        est.fit(_small_data())
    with pytest.raises(EstimatorError, match="event handlers must be EventHandler"):
        est.fit(_small_data(), epochs=1, event_handlers=["log"])
    with pytest.raises(EstimatorError, match="log_interval must be"):
        LoggingHandler(log_interval="batch")
    with pytest.raises(EstimatorError, match="save_best=True needs monitor"):
        CheckpointHandler("unused-dir-never-made", save_best=True)
    with pytest.raises(EstimatorError, match="CompositeEvalMetric cannot be monitored"):
        EarlyStoppingHandler(monitor=mx.metric.CompositeEvalMetric([mx.metric.Accuracy()]))


def test_training_across_two_devices_equals_one_device():
    # the batch is split across the devices and the trainer sums their gradients: the same
    # updates as on one device, up to float32 summation order. Each shape's kernel is chosen by
    # timing (oneDNN's inner product or matmul, mxkit-cpu's), so one device's batch of 8 and two
    # devices' batches of 4 may run different kernels: forced one way or the other, the weights
    # (at most 0.68) after these 9 steps differed by up to 3.6e-6, and under load a flat 1e-6 was
    # missed in 2 runs of 10 (2 of 12 on older code too). A device's gradient lost or counted twice
    # moves them by lr * gradient, around 1e-2.
    def train(contexts):
        mx.random.seed(1)
        net = nn.HybridSequential()
        net.add(nn.Dense(8, activation="relu", in_units=5), nn.Dense(2, in_units=8))
        net.initialize(mx.init.Xavier(), ctx=contexts)
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
        est = _quiet(Estimator(net, loss.SoftmaxCrossEntropyLoss(), trainer=trainer, context=contexts))
        est.fit(_small_data(), epochs=3)
        return [p.data(contexts[-1]).asnumpy() for p in net.collect_params().values()]

    for one, two in zip(train([mx.cpu(0)]), train([mx.cpu(0), mx.cpu(1)]), strict=True):
        np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-5)
