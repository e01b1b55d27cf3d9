"""The step program ``fit`` replays: bitwise the step-by-step path (one or two devices, every store
but a distributed one, which tests/test_dist_module.py of mxkit-kvstore covers, padded batches, every
optimizer with aggregated updates, buckets), and the general path wherever it does not apply
(monitors, sparse row ids, batches of other shapes)."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit import mx
from mxkit.train.module.step_program import StepProgram

FEATURES, CLASSES, BATCH = 12, 4, 8


def _mlp():
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _data(n, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, FEATURES).astype(np.float32)
    y = (x[:, :CLASSES] + 0.3 * rng.randn(n, CLASSES)).argmax(axis=1).astype(np.float32)
    return x, y


def _start_params():
    arg_shapes, _, _ = _mlp().infer_shape(data=(BATCH, FEATURES))
    rng = np.random.RandomState(1)
    return {name: rng.uniform(-0.5, 0.5, shape).astype(np.float32)
            for name, shape in zip(_mlp().list_arguments(), arg_shapes) if name not in ("data", "softmax_label")}


def _as_nd(params):
    return {name: mx.nd.array(value) for name, value in params.items()}


OPT = {"learning_rate": 0.3, "momentum": 0.9, "wd": 1e-3}


@pytest.fixture
def program_runs(monkeypatch):
    """How many batches went through a StepProgram, and how many it handed back."""
    counts = {"replayed": 0, "declined": 0}
    original = StepProgram.run

    def counting(self, batch, metric):
        done = original(self, batch, metric)
        counts["replayed" if done else "declined"] += 1
        return done

    monkeypatch.setattr(StepProgram, "run", counting)
    return counts


def _fit(n=40, epochs=3, kvstore="local", contexts=None, last_batch_handle="discard", optimizer="sgd", **fit_args):
    if callable(kvstore):  # a factory: a fresh store object per run
        kvstore = kvstore()
    x, y = _data(n)
    train = mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle=last_batch_handle)
    module = mx.mod.Module(_mlp(), context=contexts or mx.cpu(0))
    metric = mx.metric.create("acc")
    params = OPT if isinstance(optimizer, str) else ()
    module.fit(train, eval_metric=metric, kvstore=kvstore, optimizer=optimizer, optimizer_params=params,
               arg_params=_as_nd(_start_params()), num_epoch=epochs, **fit_args)
    args, _ = module.get_params()
    return {name: value.asnumpy() for name, value in args.items()}, metric.get()


def _step_by_step(n=40, epochs=3, last_batch_handle="discard"):
    """The general path written out: forward, backward, update, update_metric per batch."""
    x, y = _data(n)
    train = mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle=last_batch_handle)
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    module.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    module.init_params(arg_params=_as_nd(_start_params()))
    module.init_optimizer(kvstore=None, optimizer="sgd", optimizer_params=OPT)
    metric = mx.metric.create("acc")
    for _ in range(epochs):
        metric.reset()
        train.reset()
        for batch in train:
            module.forward(batch, is_train=True)
            module.backward()
            module.update()
            module.update_metric(metric, batch.label)
    args, _ = module.get_params()
    return {name: value.asnumpy() for name, value in args.items()}, metric.get()


def _assert_bitwise(a, b):
    assert a[0].keys() == b[0].keys()
    for name in a[0]:
        np.testing.assert_array_equal(a[0][name], b[0][name], err_msg=name)
    assert a[1] == b[1]


@pytest.mark.parametrize("kvstore", ["local", None])
def test_fit_through_the_program_equals_the_step_by_step_path_to_the_bit(kvstore, program_runs):
    fast = _fit(kvstore=kvstore)
    assert program_runs == {"replayed": 15, "declined": 0}
    _assert_bitwise(fast, _step_by_step())
    # and training moved the weights, so the comparison compares something
    assert not np.array_equal(fast[0]["fc1_weight"], _start_params()["fc1_weight"])


def test_the_program_can_be_turned_off_and_gives_the_same_numbers(monkeypatch, program_runs):
    fast = _fit()
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    program_runs.update(replayed=0, declined=0)
    general = _fit()
    assert program_runs == {"replayed": 0, "declined": 0}
    _assert_bitwise(fast, general)


def test_a_padded_batch_is_replayed_and_trained_on_as_the_step_by_step_path_does(program_runs):
    # 44 samples in batches of 8: the sixth batch of each epoch carries 4 samples of padding (the
    # first ones again), which fit trains on, as MXNet's does
    fast = _fit(n=44, last_batch_handle="pad")
    assert program_runs == {"replayed": 18, "declined": 0}
    _assert_bitwise(fast, _step_by_step(n=44, last_batch_handle="pad"))
    _assert_bitwise(fast, _fit(n=44, last_batch_handle="pad", kvstore=None))


def test_a_rolled_over_batch_is_replayed_as_the_general_path(monkeypatch, program_runs):
    fast = _fit(n=44, last_batch_handle="roll_over")
    assert program_runs["declined"] == 0 and program_runs["replayed"] > 0
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _assert_bitwise(fast, _fit(n=44, last_batch_handle="roll_over"))


def test_a_short_last_batch_rebinds_on_the_general_path_and_the_program_follows(program_runs):
    x, y = _data(20)
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    batches = [mx.io.DataBatch([mx.nd.array(x[i:i + size])], [mx.nd.array(y[i:i + size])])
               for i, size in ((0, 8), (8, 8), (16, 4))]

    class Short(mx.io.DataIter):
        provide_data = (mx.io.DataDesc("data", (BATCH, FEATURES)),)
        provide_label = (mx.io.DataDesc("softmax_label", (BATCH,)),)

        def __iter__(self):
            return iter(batches)

        def reset(self):
            pass

    metric = mx.metric.create("acc")
    module.fit(Short(), eval_metric=metric, kvstore=None, optimizer_params=OPT, arg_params=_as_nd(_start_params()),
               num_epoch=2)
    # the 4-sample batch re-binds the executor; the next epoch's full batches re-bind it back on the
    # general path too, after which the program resolves the new executor and replays again
    assert program_runs["declined"] >= 2 and program_runs["replayed"] >= 3

    reference = mx.mod.Module(_mlp(), context=mx.cpu(0))
    reference.bind(data_shapes=Short.provide_data, label_shapes=Short.provide_label)
    reference.init_params(arg_params=_as_nd(_start_params()))
    reference.init_optimizer(kvstore=None, optimizer_params=OPT)
    expected_metric = mx.metric.create("acc")
    for _ in range(2):
        expected_metric.reset()
        for batch in batches:
            reference.forward_backward(batch)
            reference.update()
            reference.update_metric(expected_metric, batch.label)
    got, want = module.get_params()[0], reference.get_params()[0]
    for name in want:
        np.testing.assert_array_equal(got[name].asnumpy(), want[name].asnumpy(), err_msg=name)
    assert metric.get() == expected_metric.get()


TWO_DEVICES = [mx.cpu(0), mx.cpu(1)]


@pytest.mark.parametrize("kvstore,update_on_kvstore", [
    ("local", "1"),  # the store sums the gradients and runs the optimizer; every device pulls
    ("local", "0"),  # the store sums the gradients; each device's updater runs (one aggregated call each)
    ("device", "1"),
    (None, "0"),  # no store: the gradients are summed over the devices
])
def test_two_devices_replay_the_step_by_step_path_to_the_bit(kvstore, update_on_kvstore, monkeypatch,
                                                             program_runs):
    monkeypatch.setenv("MXKIT_UPDATE_ON_KVSTORE", update_on_kvstore)
    fast = _fit(contexts=TWO_DEVICES, kvstore=kvstore, epochs=2)
    assert program_runs == {"replayed": 10, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    general = _fit(contexts=TWO_DEVICES, kvstore=kvstore, epochs=2)
    assert program_runs == {"replayed": 10, "declined": 0}
    _assert_bitwise(fast, general)
    assert not np.array_equal(fast[0]["fc1_weight"], _start_params()["fc1_weight"])


def test_two_devices_with_padding_and_uneven_work_loads_replay_the_general_path(monkeypatch, program_runs):
    def train():
        x, y = _data(44)
        train = mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle="pad")
        module = mx.mod.Module(_mlp(), context=TWO_DEVICES, work_load_list=[3, 1])
        metric = mx.metric.create("acc")
        module.fit(train, eval_metric=metric, optimizer="sgd", optimizer_params=OPT,
                   arg_params=_as_nd(_start_params()), num_epoch=2)
        return {name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get()

    fast = train()
    assert program_runs == {"replayed": 12, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _assert_bitwise(fast, train())


def test_two_devices_hold_their_slices_of_each_batch(program_runs, monkeypatch):
    x, y = _data(40)
    seen = []
    original = StepProgram.run

    def capture(self, batch, metric):
        done = original(self, batch, metric)
        seen.append([(executor.arg_dict["data"].asnumpy().copy(), executor.arg_dict["softmax_label"].asnumpy().copy())
                     for executor in self._execs])
        return done

    monkeypatch.setattr(StepProgram, "run", capture)
    module = mx.mod.Module(_mlp(), context=TWO_DEVICES)
    module.fit(mx.io.NDArrayIter(x, y, batch_size=BATCH), optimizer_params=OPT, arg_params=_as_nd(_start_params()),
               num_epoch=1)
    assert len(seen) == 5
    for index, devices in enumerate(seen):
        start = index * BATCH
        for k, (data, label) in enumerate(devices):
            part = slice(start + k * BATCH // 2, start + (k + 1) * BATCH // 2)
            np.testing.assert_array_equal(data, x[part])
            np.testing.assert_array_equal(label, y[part])


def test_a_store_object_in_use_is_replayed_as_the_general_path(monkeypatch, program_runs):
    fast = _fit(kvstore=lambda: mx.kv.create("local"), epochs=2)
    assert program_runs == {"replayed": 10, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _assert_bitwise(fast, _fit(kvstore=lambda: mx.kv.create("local"), epochs=2))


def test_a_monitor_takes_the_general_path(program_runs):
    seen = []
    monitor = mx.mon.Monitor(1, stat_func=lambda a: mx.nd.norm(a), pattern="fc1_output")
    original = monitor.toc

    def toc():
        result = original()
        seen.extend(result)
        return result

    monitor.toc = toc
    _fit(epochs=1, monitor=monitor)
    assert program_runs == {"replayed": 0, "declined": 0}
    assert seen, "the monitor saw no step"


def test_sparse_row_ids_take_the_general_path(program_runs):
    _fit(epochs=1, sparse_row_id_fn=lambda batch: {})
    assert program_runs == {"replayed": 0, "declined": 0}


def test_batch_end_callbacks_see_the_same_metric_per_step(monkeypatch):
    def record(into):
        def callback(param):
            into.append(param.eval_metric.get()[1])
        return callback

    fast, general = [], []
    _fit(epochs=1, batch_end_callback=record(fast))
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _fit(epochs=1, batch_end_callback=record(general))
    assert len(fast) == 5 and fast == general


def test_feedforward_trains_through_the_program(program_runs, monkeypatch):
    x, y = _data(40)

    def train():
        np.random.seed(5)  # FeedForward shuffles its numpy training data
        model = mx.model.FeedForward(_mlp(), ctx=mx.cpu(0), num_epoch=2, optimizer="sgd", numpy_batch_size=BATCH,
                                     arg_params=_as_nd(_start_params()), **OPT)
        model.fit(x, y, kvstore=None)
        return {name: value.asnumpy() for name, value in model.arg_params.items()}

    fast = train()
    assert program_runs["replayed"] == 10
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    general = train()
    for name in general:
        np.testing.assert_array_equal(fast[name], general[name], err_msg=name)


def _bucket_sym_gen(key):
    data = mx.sym.Variable("data")
    net = mx.sym.mean(data, axis=1)  # (batch, key, features) -> (batch, features): one weight shape per bucket
    net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax"), ("data",), ("softmax_label",)


class _Buckets(mx.io.DataIter):
    """Batches of sequence lengths 5 (the default bucket) and 3, alternating."""

    def __init__(self):
        super().__init__(BATCH)
        rng = np.random.RandomState(3)
        self.batches = []
        for index in range(6):
            key = 5 if index % 2 == 0 else 3
            x = rng.randn(BATCH, key, FEATURES).astype(np.float32)
            y = rng.randint(0, CLASSES, BATCH).astype(np.float32)
            self.batches.append(mx.io.DataBatch(
                [mx.nd.array(x)], [mx.nd.array(y)], bucket_key=key, provide_data=[mx.io.DataDesc("data", x.shape)],
                provide_label=[mx.io.DataDesc("softmax_label", y.shape)]))

    @property
    def provide_data(self):
        return self.batches[0].provide_data

    @property
    def provide_label(self):
        return self.batches[0].provide_label

    def __iter__(self):
        return iter(self.batches)

    def reset(self):
        pass


def _fit_buckets(contexts=None):
    module = mx.mod.BucketingModule(_bucket_sym_gen, default_bucket_key=5, context=contexts or mx.cpu(0))
    metric = mx.metric.create("acc")
    module.fit(_Buckets(), eval_metric=metric, kvstore=None, optimizer_params=OPT, initializer=mx.init.Xavier(),
               num_epoch=2)
    args, _ = module.get_params()
    return {name: value.asnumpy() for name, value in args.items()}, metric.get()


@pytest.mark.parametrize("contexts", [[mx.cpu(0)], TWO_DEVICES], ids=["one device", "two devices"])
def test_bucketing_module_switching_buckets_equals_the_general_path(contexts, program_runs, monkeypatch):
    mx.random.seed(7)
    fast = _fit_buckets(contexts)
    # fit's prepare() binds bucket 3 (borrowing the optimizer) before its first batch: all replay
    assert program_runs == {"replayed": 12, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    mx.random.seed(7)
    _assert_bitwise(fast, _fit_buckets(contexts))


def _aggregating_optimizers():
    """Every registered optimizer whose updates are aggregated (many weights per engine operation)."""
    registry = mx.optimizer.Optimizer.opt_registry
    return sorted(name for name in registry if mx.optimizer.create(name, learning_rate=0.01).aggregate_num > 0)


def test_the_aggregating_optimizers_are_the_fused_ones():
    # a guard for the list below: an optimizer added to the registry joins the bitwise test by itself
    assert {"sgd", "nag", "adam", "rmsprop", "lamb", "lars"} <= set(_aggregating_optimizers())


@pytest.mark.parametrize("optimizer", [*_aggregating_optimizers(), "one-by-one sgd"])
@pytest.mark.parametrize("contexts", [[mx.cpu(0)], TWO_DEVICES], ids=["one device", "two devices"])
def test_every_aggregating_optimizer_and_unaggregated_updates_give_the_same_numbers(optimizer, contexts, monkeypatch,
                                                                                   program_runs):
    def train():
        if optimizer == "one-by-one sgd":  # an updater that takes the weights one at a time
            chosen = mx.optimizer.SGD(momentum=0.9, learning_rate=0.3, wd=1e-3, rescale_grad=1.0 / BATCH)
            chosen.aggregate_num = 0
            return _fit(epochs=2, optimizer=chosen, contexts=contexts, kvstore=None)
        x, y = _data(40)
        module = mx.mod.Module(_mlp(), context=contexts)
        metric = mx.metric.create("acc")
        # the module's updater, not the store's, so that the aggregated update runs on every device
        module.fit(mx.io.NDArrayIter(x, y, batch_size=BATCH), eval_metric=metric, optimizer=optimizer, kvstore=None,
                   optimizer_params={"learning_rate": 0.01}, arg_params=_as_nd(_start_params()), num_epoch=2)
        return {name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get()

    fast = train()
    assert program_runs == {"replayed": 10, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    general = train()
    _assert_bitwise(fast, general)
    assert any(not np.array_equal(fast[0][name], value) for name, value in _start_params().items())


class _Recording(mx.io.DataIter):
    """An iterator that hands out another's batches and keeps them, to see what was read of them."""

    def __init__(self, inner):
        super().__init__(inner.batch_size)
        self.inner, self.batches = inner, []

    @property
    def provide_data(self):
        return self.inner.provide_data

    @property
    def provide_label(self):
        return self.inner.provide_label

    def next(self):
        batch = self.inner.next()
        self.batches.append(batch)
        return batch

    def reset(self):
        self.inner.reset()


def test_ndarray_iter_batches_fill_the_bound_inputs_without_conversion(program_runs):
    """NDArrayIter's batches are copied from their host arrays straight into the bound inputs: their
    data is never converted to NDArrays, and the weights are the step-by-step path's to the bit."""
    x, y = _data(40)
    train = _Recording(mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle="discard"))
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    metric = mx.metric.create("acc")
    module.fit(train, eval_metric=metric, kvstore="local", optimizer="sgd", optimizer_params=OPT,
               arg_params=_as_nd(_start_params()), num_epoch=3)
    assert program_runs == {"replayed": 15, "declined": 0}
    assert len(train.batches) == 15
    assert all(batch.host_data is not None and batch._data is None for batch in train.batches)
    # nor its labels: the accuracy counts against the bound label input, which holds the same bits
    assert all(batch.host_label is not None and batch._label is None for batch in train.batches)
    fast = ({name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get())
    _assert_bitwise(fast, _step_by_step())


def test_the_bound_input_holds_each_batch_in_turn(program_runs, monkeypatch):
    """The executor reads the batch just filled in, not a later one: the data input is captured by a
    forward hook on every step and compared with the iterator's slices."""
    x, y = _data(40)
    train = mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle="discard")
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    seen = []
    original = StepProgram.run

    def capture(self, batch, metric):
        done = original(self, batch, metric)
        seen.append(self._execs[0].arg_dict["data"].asnumpy().copy())
        return done

    monkeypatch.setattr(StepProgram, "run", capture)
    module.fit(train, kvstore=None, optimizer="sgd", optimizer_params=OPT, arg_params=_as_nd(_start_params()),
               num_epoch=1)
    assert len(seen) == 5
    for index, data in enumerate(seen):
        np.testing.assert_array_equal(data, x[index * BATCH:(index + 1) * BATCH])


def test_prefetching_iter_over_ndarray_iter_equals_the_step_by_step_path(program_runs):
    x, y = _data(40)
    train = mx.io.PrefetchingIter(mx.io.NDArrayIter(x, y, batch_size=BATCH, last_batch_handle="discard"))
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    metric = mx.metric.create("acc")
    module.fit(train, eval_metric=metric, kvstore=None, optimizer="sgd", optimizer_params=OPT,
               arg_params=_as_nd(_start_params()), num_epoch=3)
    assert program_runs == {"replayed": 15, "declined": 0}
    fast = ({name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get())
    _assert_bitwise(fast, _step_by_step())


def test_host_arrays_of_another_dtype_are_converted_as_before(program_runs, monkeypatch):
    """float64 host data for a float32 input: the batch's converted arrays are copied in (with the
    cast), the same numbers with and without the program."""
    x, y = _data(40)

    def train():
        it = mx.io.NDArrayIter(mx.nd.array(x, dtype="float64"), y, batch_size=BATCH, last_batch_handle="discard")
        module = mx.mod.Module(_mlp(), context=mx.cpu(0))
        metric = mx.metric.create("acc")
        module.fit(it, eval_metric=metric, kvstore=None, optimizer="sgd", optimizer_params=OPT,
                   arg_params=_as_nd(_start_params()), num_epoch=2)
        return {name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get()

    fast = train()
    assert program_runs["replayed"] == 10
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _assert_bitwise(fast, train())


class _KeepingAccuracy(mx.metric.EvalMetric):
    """A metric of the user's own that keeps the label arrays it is given and counts at ``get()``."""

    def __init__(self):
        super().__init__("kept-accuracy")
        self.kept = []

    def update(self, labels, preds):
        self.kept.extend(zip(labels, [pred.copy() for pred in preds]))

    def get(self):
        correct = sum(int((pred.asnumpy().argmax(axis=1) == label.asnumpy()).sum()) for label, pred in self.kept)
        return self.name, correct / sum(label.shape[0] for label, _ in self.kept)


def test_a_metric_of_the_users_own_gets_each_batchs_labels_not_the_bound_input(program_runs):
    """The bound label input is overwritten by every step: a metric that keeps what it is given
    (a class of the user's own) gets the batch's own label arrays, one per batch."""
    x, y = _data(40)
    module = mx.mod.Module(_mlp(), context=mx.cpu(0))
    metric = _KeepingAccuracy()
    module.fit(mx.io.NDArrayIter(x, y, batch_size=BATCH), eval_metric=metric, kvstore=None, optimizer_params=OPT,
               arg_params=_as_nd(_start_params()), num_epoch=1)
    assert program_runs == {"replayed": 5, "declined": 0}
    assert len(metric.kept) == 5
    for index, (label, _) in enumerate(metric.kept):
        np.testing.assert_array_equal(label.asnumpy(), y[index * BATCH:(index + 1) * BATCH])


def test_a_composite_of_mx_metrics_counts_the_same_as_the_general_path(monkeypatch, program_runs):
    def train():
        x, y = _data(40)
        module = mx.mod.Module(_mlp(), context=TWO_DEVICES)
        metric = mx.metric.create(["acc", "ce", mx.metric.TopKAccuracy(top_k=2)])
        module.fit(mx.io.NDArrayIter(x, y, batch_size=BATCH), eval_metric=metric, optimizer_params=OPT,
                   arg_params=_as_nd(_start_params()), num_epoch=2)
        return {name: value.asnumpy() for name, value in module.get_params()[0].items()}, metric.get()

    fast = train()
    assert program_runs == {"replayed": 10, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    _assert_bitwise(fast, train())
