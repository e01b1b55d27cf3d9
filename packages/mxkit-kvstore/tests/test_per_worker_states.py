"""Asynchronous servers keep an optimizer state per key and worker (PerWorkerUpdater).

The reference is a numpy replay of MXNet's SGD-momentum rule (``mom = m*mom - lr*(rescale*g
+ wd*w)``, ``w += mom``) with one ``mom`` per worker, against a second replay with one
shared ``mom``: the two differ, so each test below fails if the server keeps the other.
"""

import numpy as np
import pytest
from mxkit.core.errors import FormatError, KVStoreError

pytest.importorskip("mxkit.train")

LR, MOMENTUM, WD = 0.1, 0.9, 0.01


def sgd():
    from mxkit.train import optimizer

    return optimizer.create("sgd", learning_rate=LR, momentum=MOMENTUM, wd=WD)


def replay(w0, pushes, per_worker):
    """The weight after applying ``pushes`` (``[(rank, grad)]``, in order) in float64."""
    weight = w0.astype(np.float64)
    moms: dict = {}
    for rank, grad in pushes:
        slot = rank if per_worker else 0
        mom = moms.get(slot, np.zeros_like(weight))
        mom = MOMENTUM * mom - LR * (grad + WD * weight)
        moms[slot] = mom
        weight = weight + mom
    return weight


def random_pushes(rng, n, size):
    return [(int(rng.integers(2)), rng.standard_normal(size).astype(np.float32)) for _ in range(n)]


@pytest.mark.parametrize(("model", "optimizer_states", "per_worker"), [
    ("eventual", "per_worker", True), ("eventual", "shared", False), ("bounded_delay", "per_worker", True),
])
def test_an_asynchronous_server_applies_each_push_with_its_workers_state(model, optimizer_states, per_worker):
    from mxkit.kvstore.dist.server import ParameterServer

    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(7).astype(np.float32)
    pushes = random_pushes(rng, 12, 7)
    server = ParameterServer(0, num_workers=2)
    server.configure(0, model, {"tau": 100} if model == "bounded_delay" else {}, optimizer_states)
    server.init([(("w", 0), w0.copy())])
    server.set_optimizer(0, sgd().dumps())
    rounds = [0, 0]
    for rank, grad in pushes:
        server.push_values(rank, 0, [(("w", 0), rounds[rank])], [grad])
        rounds[rank] += 1
    expected = replay(w0, pushes, per_worker)
    other = replay(w0, pushes, not per_worker)
    # float32 arithmetic over 12 steps of values of order 1: far inside the gap between the rules
    assert np.abs(expected - other).max() > 1e-2
    np.testing.assert_allclose(server.value(("w", 0)), expected, rtol=1e-4, atol=1e-5)


def test_a_dist_sync_server_keeps_one_state_whatever_the_worker_asks():
    """A merged round has no single worker: the store sends 'shared' for sequential, and a
    server told otherwise by one worker and 'shared' by another refuses the second."""
    from mxkit.kvstore.dist.server import ParameterServer

    server = ParameterServer(0, num_workers=2)
    server.configure(0, "eventual", {}, "per_worker")
    with pytest.raises(KVStoreError, match="optimizer states"):
        server.configure(1, "eventual", {}, "shared")
    with pytest.raises(KVStoreError, match="'shared' or 'per_worker'"):
        ParameterServer(0, num_workers=2).configure(0, "eventual", {}, "per_rank")


def test_per_worker_states_survive_a_states_file_and_refuse_a_shared_updater(tmp_path):
    from mxkit.kvstore.dist.states import read_states, write_states
    from mxkit.kvstore.updater import OptimizerUpdater, PerWorkerUpdater, WorkerStates
    from mxkit.ndarray import array

    updater = PerWorkerUpdater(sgd(), 3)
    weight = array(np.ones(4, np.float32))
    updater.update(2, "w", array(np.full(4, 2.0, np.float32)), weight)
    states = {key: np.asarray(state[2].asnumpy()) for key, state in updater.states.items()}
    assert list(states) == ["w"] and updater.states["w"][0] is None and updater.states["w"][1] is None
    fname = str(tmp_path / "async.states")
    write_states(fname, updater.states)
    loaded = read_states(fname)
    assert isinstance(loaded["w"], WorkerStates) and loaded["w"][:2] == [None, None]
    np.testing.assert_array_equal(loaded["w"][2], states["w"])

    with pytest.raises(FormatError, match="one optimizer state per worker"):
        OptimizerUpdater(sgd()).load_states(fname, {})
    with pytest.raises(KVStoreError, match="job of 3 workers; this job has 2"):
        PerWorkerUpdater(sgd(), 2).states = loaded


def test_a_shared_state_loaded_into_per_worker_states_continues_as_worker_0s():
    from mxkit.kvstore.updater import PerWorkerUpdater
    from mxkit.ndarray import array

    updater = PerWorkerUpdater(sgd(), 2)
    updater.states = {"w": array(np.full(3, 0.5, np.float32))}
    np.testing.assert_array_equal(updater.states["w"][0].asnumpy(), np.full(3, 0.5))
    assert updater.states["w"][1] is None
    assert updater.state_of("missing") is None


def test_a_request_of_several_keys_updates_them_with_its_workers_states():
    """Several keys in one push go to the optimizer together (the aggregated update): still
    each with the pushing worker's state."""
    from mxkit.kvstore.dist.server import ParameterServer

    rng = np.random.default_rng(5)
    w0, v0 = rng.standard_normal(5).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    pushes_w, pushes_v = random_pushes(rng, 10, 5), random_pushes(rng, 10, 3)
    server = ParameterServer(0, num_workers=2)
    server.configure(0, "eventual", {}, "per_worker")
    server.init([(("w", 0), w0.copy()), (("v", 0), v0.copy())])
    server.set_optimizer(0, sgd().dumps())
    rounds = [0, 0]
    ranks = [rank for rank, _ in pushes_w]
    for rank, (_, grad_w), (_, grad_v) in zip(ranks, pushes_w, pushes_v):
        server.push_values(rank, 0, [(("w", 0), rounds[rank]), (("v", 0), rounds[rank])], [grad_w, grad_v])
        rounds[rank] += 1
    expected_w = replay(w0, [(rank, grad) for rank, (_, grad) in zip(ranks, pushes_w)], True)
    expected_v = replay(v0, [(rank, grad) for rank, (_, grad) in zip(ranks, pushes_v)], True)
    np.testing.assert_allclose(server.value(("w", 0)), expected_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(server.value(("v", 0)), expected_v, rtol=1e-4, atol=1e-5)
