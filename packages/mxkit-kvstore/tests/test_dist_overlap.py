"""A dist store's pushpull as an engine operation (mxkit.kvstore.dist.overlap): it returns
before the servers answer, readers of the pulled arrays wait for it, the values it pushes
are those of the call, and its errors surface clearly; results against the blocking path
and numpy replays."""

import threading

import mxkit.kvstore as kvstore
import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import config
from mxkit.core.errors import EngineError, KVStoreError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


def store(job, rank=0, num_workers=1, overlap=True, timeout=30.0):
    with config.override(kvstore_overlap=overlap):
        return kvstore.create("dist_sync", rank=rank, num_workers=num_workers, namespace=job.namespace,
                              timeout=timeout)


def test_pushpull_returns_before_the_round_is_complete_and_a_reader_waits_for_it(shared_job):
    job = shared_job(2, 1)
    returned, results, errors = threading.Event(), {}, []

    def worker(rank):
        try:
            kv = store(job, rank, 2)
            kv.init("wait", nd.zeros((3,)))
            out = nd.zeros((3,))
            if rank == 1:  # pushes only once rank 0's pushpull has returned: a blocking one never would
                assert returned.wait(60), "rank 0's pushpull did not return before rank 1 pushed"
            kv.pushpull("wait", nd.array(np.full(3, rank + 1.0)), out=out)
            if rank == 0:
                returned.set()
            results[rank] = (out * 2).asnumpy()  # an operation reading out waits for the pull
            kv.barrier()
        except Exception as exc:  # reported by the test
            errors.append(exc)
            returned.set()

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert not errors, errors
    for rank in range(2):
        np.testing.assert_array_equal(results[rank], np.full(3, 6.0))  # (1 + 2) * 2


def test_a_pushpull_sends_the_values_of_the_call_and_later_calls_see_it(shared_job):
    job = shared_job(1, 2)  # "split" (60 elements) is split across the two servers (bound 50)
    kv = store(job)
    shapes = {"ov_small": (4,), "ov_split": (60,)}
    kv.init(list(shapes), [nd.zeros(shape) for shape in shapes.values()])
    rng = np.random.default_rng(3)
    expected = {}
    for step in range(4):
        grads = {key: rng.integers(-9, 9, size=shape).astype(np.float32) for key, shape in shapes.items()}
        values = [nd.array(grad) for grad in grads.values()]
        outs = [nd.zeros(shape) for shape in shapes.values()]
        kv.pushpull(list(shapes), values, out=outs)
        for value in values:
            value[:] = 999.0  # written after the call: the push read the value first
        expected = grads  # one worker, no updater: a round's sum replaces the value
        for key, out in zip(shapes, outs, strict=True):
            np.testing.assert_array_equal(out.asnumpy(), expected[key], err_msg=f"{key} step {step}")
    # a blocking pull after the overlapped pushpulls reads what they pushed
    outs = [nd.zeros(shape) for shape in shapes.values()]
    kv.pull(list(shapes), out=outs)
    for key, out in zip(shapes, outs, strict=True):
        np.testing.assert_array_equal(out.asnumpy(), expected[key])
    # a push that waits to ride along with the next call goes with an overlapped pushpull
    kv.push("ov_small", nd.array(np.arange(4, dtype=np.float32)))
    in_place = nd.array(np.full(60, 5.0, dtype=np.float32))
    kv.pushpull("ov_split", in_place)  # no out: the pushed array receives the result
    out = nd.zeros((4,))
    kv.pull("ov_small", out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(in_place.asnumpy(), np.full(60, 5.0))


def _sgd_momentum_replay(initial, grads_per_step, lr, momentum):
    weight, mom = initial.astype(np.float32).copy(), np.zeros_like(initial, dtype=np.float32)
    for grad in grads_per_step:
        mom = (np.float32(momentum) * mom - np.float32(lr) * grad).astype(np.float32)
        weight = (weight + mom).astype(np.float32)
    return weight


def test_overlapped_and_blocking_pushpull_give_bit_identical_optimizer_results(start_job):
    from mxkit.mx import optimizer as opt

    rng = np.random.default_rng(11)
    initial = {"w": rng.normal(size=(6, 5)).astype(np.float32), "b": rng.normal(size=(5,)).astype(np.float32)}
    grads = [{key: rng.normal(size=value.shape).astype(np.float32) for key, value in initial.items()}
             for _ in range(5)]
    results = []
    for overlap in (True, False):
        job = start_job(1, 1)
        kv = store(job, overlap=overlap)
        kv.set_optimizer(opt.create("sgd", learning_rate=0.1, momentum=0.9))
        kv.init(list(initial), [nd.array(value) for value in initial.values()])
        weights = [nd.zeros(value.shape) for value in initial.values()]
        for step in grads:
            kv.pushpull(list(initial), [nd.array(step[key]) for key in initial], out=weights)
        results.append([weight.asnumpy() for weight in weights])
    for overlapped, blocking in zip(*results, strict=True):
        np.testing.assert_array_equal(overlapped, blocking)
    # and both are MXNet's momentum SGD, replayed with numpy (same float32 operations)
    replay = _sgd_momentum_replay(initial["b"], [step["b"] for step in grads], 0.1, 0.9)
    np.testing.assert_allclose(results[0][1], replay, rtol=1e-6, atol=1e-6)


@pytest.fixture
def lone_worker_job(start_job):
    """A 1-worker job whose server refuses pulls of an unknown part (the error path)."""
    return start_job(1, 1)


def test_a_server_error_of_an_overlapped_pushpull_is_raised_by_the_reader_and_the_next_call(lone_worker_job):
    kv = store(lone_worker_job)
    kv.init("known", nd.zeros((2,)))
    kv._keys["ghost"] = kv._keys["known"].__class__("ghost", (2,), np.float32, kv._keys["known"].parts)
    out = nd.zeros((2,))
    kv.pushpull("ghost", nd.ones((2,)), out=out)  # the server has no such key: its answer is an error
    with pytest.raises(EngineError, match=r"kvstore\.pushpull.*ghost.*before init"):
        out.wait_to_read()
    with pytest.raises(KVStoreError, match=r"ghost.*before init"):
        kv.pull("known", out=nd.zeros((2,)))


def test_module_training_through_overlapped_pushpull_is_bit_identical_to_the_blocking_path(start_job):
    mx = pytest.importorskip("mxkit.mx", reason="Module needs the mxkit facade")
    rng = np.random.default_rng(21)
    data = rng.normal(size=(48, 6)).astype(np.float32)
    label = (data[:, 0] + data[:, 1] > 0).astype(np.float32)
    initial = {"fc1_weight": rng.normal(scale=0.5, size=(8, 6)), "fc1_bias": np.zeros(8),
               "fc2_weight": rng.normal(scale=0.5, size=(2, 8)), "fc2_bias": np.zeros(2)}
    hidden = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=8, name="fc1"),
                               act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=2, name="fc2"), name="softmax")
    trained = []
    for overlap in (True, False):
        kv = store(start_job(1, 1), overlap=overlap)
        module = mx.mod.Module(net, context=mx.cpu())
        module.fit(mx.io.NDArrayIter(data, label, batch_size=8), num_epoch=2, kvstore=kv, optimizer="sgd",
                   optimizer_params={"learning_rate": 0.2, "momentum": 0.9},
                   arg_params={name: mx.nd.array(value.astype(np.float32)) for name, value in initial.items()})
        trained.append({name: value.asnumpy() for name, value in module.get_params()[0].items()})
    for name, value in trained[0].items():
        np.testing.assert_array_equal(value, trained[1][name], err_msg=name)
    assert not np.array_equal(trained[0]["fc1_weight"], initial["fc1_weight"].astype(np.float32))
