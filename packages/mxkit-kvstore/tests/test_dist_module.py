"""Module.fit with a dist_sync store on 2 workers trains exactly as one worker on the union
of their batches (the contract ``mxkit train --kvstore dist_sync`` relies on)."""

import threading
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]
mx = pytest.importorskip("mxkit.mx", reason="Module needs the mxkit facade")

BATCH, SAMPLES, FEATURES = 8, 32, 6


def network():
    data, label = mx.sym.Variable("data"), mx.sym.Variable("softmax_label")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"), act_type="tanh")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=2, name="fc2"), label, name="softmax")


def initial_params():
    rng = np.random.default_rng(5)
    shapes = {"fc1_weight": (8, FEATURES), "fc1_bias": (8,), "fc2_weight": (2, 8), "fc2_bias": (2,)}
    return {name: rng.normal(scale=0.5, size=shape).astype(np.float32) for name, shape in shapes.items()}


def fit(data, label, batch_size, kvstore):
    module = mx.mod.Module(network(), context=mx.cpu())
    module.fit(mx.io.NDArrayIter(data, label, batch_size=batch_size), num_epoch=2, kvstore=kvstore,
               optimizer="sgd", optimizer_params={"learning_rate": 0.5, "momentum": 0.9},
               arg_params={k: mx.nd.array(v) for k, v in initial_params().items()})
    return {name: value.asnumpy() for name, value in module.get_params()[0].items()}


def test_module_fit_on_two_dist_sync_workers_equals_one_worker_on_the_union(start_job):
    job = start_job(2, 2, bigarray_bound=40)  # fc1_weight (48 elements) is split across the servers
    rng = np.random.default_rng(6)
    data = rng.normal(size=(2, SAMPLES, FEATURES)).astype(np.float32)
    label = (data[..., 0] > 0).astype(np.float32)
    trained, errors = {}, []

    def worker(rank):
        try:
            kv = mx.kv.create("dist_sync", rank=rank, num_workers=2, namespace=job.namespace, timeout=60)
            trained[rank] = fit(data[rank], label[rank], BATCH, kv)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    assert not errors, errors
    # one worker, each batch the two workers' batches of that step side by side
    union = lambda x: np.concatenate([np.concatenate([x[0][i:i + BATCH], x[1][i:i + BATCH]])  # noqa: E731
                                      for i in range(0, SAMPLES, BATCH)])
    serial = fit(union(data), union(label), 2 * BATCH, None)
    for name, value in serial.items():
        np.testing.assert_allclose(trained[0][name], value, rtol=1e-4, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(trained[1][name], trained[0][name])
    assert not np.allclose(serial["fc1_weight"], initial_params()["fc1_weight"])


def _fit_two_workers(job, data, label, metric_names=("acc",)):
    """Module.fit on the 2 dist_sync workers of ``job`` (each its half of the data); the weights and
    metric values of each rank."""
    trained, errors = {}, []

    def worker(rank):
        try:
            kv = mx.kv.create("dist_sync", rank=rank, num_workers=2, namespace=job.namespace, timeout=60)
            module = mx.mod.Module(network(), context=mx.cpu())
            metric = mx.metric.create(list(metric_names))
            module.fit(mx.io.NDArrayIter(data[rank], label[rank], batch_size=BATCH, last_batch_handle="pad"),
                       eval_metric=metric, num_epoch=2, kvstore=kv, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.5, "momentum": 0.9, "wd": 1e-3},
                       arg_params={k: mx.nd.array(v) for k, v in initial_params().items()})
            trained[rank] = ({name: value.asnumpy() for name, value in module.get_params()[0].items()},
                             metric.get())
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    assert not errors, errors
    return trained


@pytest.mark.slow  # two jobs of two workers: 10-25 s
def test_module_fit_replays_its_step_program_on_dist_sync_workers_to_the_bit(start_job, monkeypatch):
    """fit's step program (one pushpull of every key per step through the store) gives the
    weights and metric values of the step-by-step path, bit for bit, on every worker."""
    from mxkit.train.module.step_program import StepProgram

    counts = {"replayed": 0, "declined": 0}
    original = StepProgram.run

    def counting(self, batch, metric):
        done = original(self, batch, metric)
        counts["replayed" if done else "declined"] += 1
        return done

    monkeypatch.setattr(StepProgram, "run", counting)
    rng = np.random.default_rng(8)
    data = rng.normal(size=(2, SAMPLES + 4, FEATURES)).astype(np.float32)  # a padded last batch per epoch
    label = (data[..., 0] > 0).astype(np.float32)
    replayed = _fit_two_workers(start_job(2, 1), data, label, ("acc", "ce"))
    assert counts == {"replayed": 2 * 2 * 5, "declined": 0}
    monkeypatch.setenv("MXKIT_MODULE_STEP_PROGRAM", "0")
    general = _fit_two_workers(start_job(2, 1), data, label, ("acc", "ce"))
    assert counts["replayed"] == 2 * 2 * 5
    for rank in (0, 1):
        assert replayed[rank][1] == general[rank][1]
        for name, value in general[rank][0].items():
            np.testing.assert_array_equal(replayed[rank][0][name], value, err_msg=f"{name} of worker {rank}")
    assert not np.allclose(general[0][0]["fc1_weight"], initial_params()["fc1_weight"])


def test_module_fit_with_uneven_batches_ends_every_epoch_at_the_barrier(start_job):
    # worker 1 has one batch fewer per epoch: without fit's barrier at the epoch's end, worker 0's
    # last round would wait for a push that never comes until the timeout (MXNet #7888)
    job = start_job(2, 1)
    rng = np.random.default_rng(7)
    sizes = {0: SAMPLES, 1: SAMPLES - BATCH}
    trained, errors = {}, []

    def worker(rank):
        try:
            kv = mx.kv.create("dist_sync", rank=rank, num_workers=2, namespace=job.namespace, timeout=30)
            data = rng.normal(size=(sizes[rank], FEATURES)).astype(np.float32)
            trained[rank] = fit(data, (data[:, 0] > 0).astype(np.float32), BATCH, kv)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert sorted(trained) == [0, 1]
    assert time.monotonic() - started < 30  # well before a round's timeout would fire
    assert all(np.isfinite(value).all() for params in trained.values() for value in params.values())


def _digits_accuracy(job, kind, epochs=3):
    """Validation accuracy of the scikit-learn digits after ``epochs`` of Module.fit on the 2
    workers of ``job`` through a ``kind`` store, with ``mxkit train``'s options (lr 0.1, momentum
    0.9, batch 32 per worker)."""
    datasets = pytest.importorskip("sklearn.datasets")
    from mxkit.mx.train_networks import build_network

    digits = datasets.load_digits()
    images = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(labels))
    train, valid = order[:1440], order[1440:]
    net = build_network("lenet", (1, 8, 8), 10)  # mxkit train's default network
    accuracy, errors = {}, []

    def worker(rank):
        try:
            mx.random.seed(rank)
            kv = mx.kv.create(kind, rank=rank, num_workers=2, namespace=job.namespace, timeout=60)
            shard = train[rank::2]
            module = mx.mod.Module(net, context=mx.cpu())
            module.fit(mx.io.NDArrayIter(images[shard], labels[shard], batch_size=32, shuffle=True,
                                         last_batch_handle="discard"),
                       num_epoch=epochs, kvstore=kv, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
                       initializer=mx.init.Xavier())
            predicted = module.predict(mx.io.NDArrayIter(images[valid], labels[valid], batch_size=len(valid)))
            accuracy[rank] = float((predicted.asnumpy().argmax(axis=1) == labels[valid]).mean())
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return min(accuracy.values())


@pytest.mark.slow
def test_dist_async_and_dist_ssp_learn_like_dist_sync_with_the_same_options(start_job):
    # each asynchronous push is scaled by 1/(batch*workers) like a dist_sync round (see
    # Module.init_optimizer): with MXNet's 1/batch the 2 workers took twice dist_sync's steps on
    # stale weights and, with momentum 0.9, diverged (dist_ssp stayed at chance, 0.08-0.11).
    # How far an asynchronous run gets in 3 epochs depends on how the two workers' pushes
    # interleave, which the machine's load decides: dist_async measured 0.87-0.98 against
    # dist_sync's 0.96-0.97, and a full-suite run still fell outside a 15-point bound once. So
    # the bound is "learns like sync" (within 20 points), far above the bug's chance level
    sync = _digits_accuracy(start_job(2, 1), "dist_sync")
    assert sync > 0.85
    for kind in ("dist_async", "dist_ssp"):
        assert _digits_accuracy(start_job(2, 1), kind) > sync - 0.20, kind
