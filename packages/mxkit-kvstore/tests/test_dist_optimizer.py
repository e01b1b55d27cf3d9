"""Optimizers on the servers: sent by name and JSON parameters, the real update code run there."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import KVStoreError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]
optimizer = pytest.importorskip("mxkit.train.optimizer", reason="server-side optimizers need mxkit-train")

FEATURES, BATCH, STEPS, WORKERS = 6, 5, 6, 2
LR, MOMENTUM, WD = 0.05, 0.9, 0.01


@pytest.fixture(scope="module")
def optimizer_job(start_job):
    # 2 servers, big-array bound 4: the (6, 1) weight is split, each server runs its half
    return start_job(WORKERS, 2, bigarray_bound=4)


def batches():
    rng = np.random.default_rng(42)
    true_w = rng.normal(size=(FEATURES, 1)).astype(np.float32)
    x = rng.normal(size=(WORKERS, STEPS, BATCH, FEATURES)).astype(np.float32)
    y = x @ true_w + 0.1 * rng.normal(size=(WORKERS, STEPS, BATCH, 1)).astype(np.float32)
    return x, y


def gradient(w, x, y):
    """Of the summed squared error 0.5 * |xw - y|^2."""
    return x.T @ (x @ w - y)


def serial_momentum_sgd(x, y, w0):
    """MXNet's sgd_mom_update on the gradient of the union of every worker's batch, by hand."""
    w, mom = w0.astype(np.float64), np.zeros_like(w0, dtype=np.float64)
    rescale = 1.0 / (BATCH * WORKERS)
    for step in range(STEPS):
        union_x = np.concatenate([x[rank, step] for rank in range(WORKERS)])
        union_y = np.concatenate([y[rank, step] for rank in range(WORKERS)])
        grad = gradient(w, union_x, union_y)
        mom = MOMENTUM * mom - LR * WD * w - LR * rescale * grad
        w = w + mom
    return w, mom


def test_dist_sync_training_equals_serial_training_on_the_union_of_batches(optimizer_job, workers, tmp_path):
    x, y = batches()
    w0 = np.random.default_rng(1).normal(size=(FEATURES, 1)).astype(np.float32)
    sgd = optimizer.create("sgd", learning_rate=LR, momentum=MOMENTUM, wd=WD, rescale_grad=1.0 / (BATCH * WORKERS))

    def worker(kv):
        kv.init("fc_weight", nd.array(w0))
        kv.set_optimizer(sgd)
        weight = nd.zeros(w0.shape)
        for step in range(STEPS):
            kv.pull("fc_weight", out=weight)
            grad = gradient(weight.asnumpy(), x[kv.rank, step], y[kv.rank, step])
            kv.push("fc_weight", nd.array(grad))
        kv.pull("fc_weight", out=weight)
        kv.barrier()
        if kv.rank == 0:
            kv.save_optimizer_states(str(tmp_path / "states"))
        kv.barrier()
        return weight.asnumpy()

    expected_w, expected_mom = serial_momentum_sgd(x, y, w0)
    for trained in workers(optimizer_job, worker):
        np.testing.assert_allclose(trained, expected_w, rtol=1e-5, atol=1e-5)
    # the momentum of both halves, joined into one state of the whole key
    from mxkit.kvstore.dist.states import read_states

    states = read_states(str(tmp_path / "states"))
    np.testing.assert_allclose(states["fc_weight"], expected_mom, rtol=1e-4, atol=1e-5)


def test_a_custom_updater_needs_the_opt_in_and_then_runs_on_the_servers(optimizer_job, start_job, workers):
    def double_step(key, grad, weight):
        weight[:] = weight + 2 * grad

    def refused(kv):
        with pytest.raises(KVStoreError, match="allow_remote_code=True"):
            kv.set_updater(double_step)
        with pytest.raises(KVStoreError, match="sends the optimizer by its registered name"):
            kv.set_optimizer(object())
        return True

    assert workers(optimizer_job, refused) == [True, True]

    def allowed(kv):
        kv.init("custom", nd.ones((3,)))
        kv.set_updater(double_step)
        kv.push("custom", nd.ones((3,)) * (kv.rank + 1))
        out = nd.zeros((3,))
        kv.pull("custom", out=out)
        return out.asnumpy()

    # the worker's opt-in is not enough: the job's servers must allow remote code too
    # (they refuse before deserialising anything)
    with pytest.raises(KVStoreError, match="do not run functions sent to them"):
        workers(optimizer_job, allowed, allow_remote_code=True)
    import ray

    with pytest.raises(ray.exceptions.RayTaskError, match="do not run functions sent to them"):
        ray.get(optimizer_job.servers[0].set_updater.remote(0, b"not even a pickle"))
    for value in workers(start_job(WORKERS, 2, bigarray_bound=4, allow_remote_code=True), allowed,
                         allow_remote_code=True):
        np.testing.assert_array_equal(value, np.full(3, 1 + 2 * 3))
