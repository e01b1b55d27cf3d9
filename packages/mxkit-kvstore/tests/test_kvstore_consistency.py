"""Each consistency model's guarantee, with simulated workers (threads) at different speeds.

Worker ``w``'s gradient of round ``r`` is a one-hot vector at position ``w * ROUNDS + r``
and the updater adds it to the stored value, so a pulled value says exactly which
contributions it contains.
"""

import threading
import time

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core import config, hookimpl
from mxkit.core.errors import KVStoreError
from mxkit.core.specs import ConsistencySpec
from mxkit.kvstore import create
from mxkit.kvstore.consistency import (
    BoundedDelayConsistency,
    EventualConsistency,
    RoundCoordinator,
    SequentialConsistency,
)

ROUNDS = 5


def accumulate(key, merged, stored):
    stored += merged


def run_workers(model, delays, updater=accumulate):
    """Each worker pushes then pulls ROUNDS times, sleeping its own delays; returns what it pulled."""
    num_workers = len(delays)
    coordinator = RoundCoordinator(model, num_workers, updater)
    coordinator.init("k", np.zeros(num_workers * ROUNDS))
    pulled = {w: [] for w in range(num_workers)}
    errors = []

    def worker(w):
        try:
            for r in range(ROUNDS):
                time.sleep(delays[w][r])
                grad = np.zeros(num_workers * ROUNDS)
                grad[w * ROUNDS + r] = 1.0
                coordinator.push("k", w, grad)
                pulled[w].append(coordinator.pull("k", w, timeout=20).reshape(num_workers, ROUNDS))
        except Exception as exc:  # reported on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(num_workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return pulled, coordinator


speeds = st.integers(2, 4).flatmap(lambda n: st.lists(
    st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.004]), min_size=ROUNDS, max_size=ROUNDS), min_size=n, max_size=n))


@settings(max_examples=12, deadline=None)
@given(delays=speeds)
def test_sequential_every_pull_after_round_r_sees_exactly_rounds_up_to_r(delays):
    pulled, _ = run_workers(SequentialConsistency(len(delays)), delays)
    for w, values in pulled.items():
        for r, seen in enumerate(values):
            expected = np.zeros_like(seen)
            expected[:, :r + 1] = 1.0
            np.testing.assert_array_equal(seen, expected, err_msg=f"worker {w} after round {r}")


@settings(max_examples=12, deadline=None)
@given(delays=speeds)
def test_sequential_without_updater_every_pull_sees_exactly_the_sum_of_its_round(delays):
    num_workers = len(delays)
    pulled, _ = run_workers(SequentialConsistency(num_workers), delays, updater=None)
    for values in pulled.values():
        for r, seen in enumerate(values):
            expected = np.zeros_like(seen)
            expected[:, r] = 1.0  # the round's sum replaced the value
            np.testing.assert_array_equal(seen, expected)


@pytest.mark.parametrize("tau", [0, 1, 2])
@settings(max_examples=8, deadline=None)
@given(delays=speeds)
def test_bounded_delay_no_pull_is_more_than_tau_rounds_stale(tau, delays):
    pulled, _ = run_workers(BoundedDelayConsistency(len(delays), tau=tau), delays)
    for w, values in pulled.items():
        for r, seen in enumerate(values):
            assert set(np.unique(seen)) <= {0.0, 1.0}  # each contribution applied at most once
            assert seen[w, :r + 1].all()  # its own pushes are in
            # every worker's rounds 0 .. r - tau are in: at most tau rounds missing
            assert seen[:, :max(0, r + 1 - tau)].all(), f"worker {w} round {r} saw\n{seen}"


def test_bounded_delay_really_lets_a_fast_worker_run_ahead():
    # worker 1 is slow: with tau=2 worker 0 pulls before worker 1's pushes arrive
    pulled, _ = run_workers(BoundedDelayConsistency(2, tau=2), [[0.0] * ROUNDS, [0.05] * ROUNDS])
    assert not pulled[0][0][1].any() and not pulled[0][1][1].any()


@settings(max_examples=10, deadline=None)
@given(delays=speeds)
def test_eventual_applies_every_push_once_and_reads_its_own_writes(delays):
    num_workers = len(delays)
    pulled, coordinator = run_workers(EventualConsistency(num_workers), delays)
    for w, values in pulled.items():
        for r, seen in enumerate(values):
            assert set(np.unique(seen)) <= {0.0, 1.0}
            assert seen[w, :r + 1].all()
    final = coordinator.pull("k", 0)
    np.testing.assert_array_equal(final, np.ones(num_workers * ROUNDS))


def test_a_pull_that_can_never_be_answered_times_out_with_the_rounds():
    coordinator = RoundCoordinator(SequentialConsistency(2), 2, accumulate)
    coordinator.init(0, np.zeros(1))
    coordinator.push(0, 0, np.ones(1))
    with pytest.raises(KVStoreError, match=r"timed out after 0.05 s: pushed rounds \[1, 0\], applied \[0, 0\]"):
        coordinator.pull(0, 0, timeout=0.05)
    with pytest.raises(KVStoreError, match=r"worker 2 is out of range; workers are 0\.\.1"):
        coordinator.push(0, 2, np.ones(1))


def test_rounds_never_mix_two_pushes_of_one_worker():
    coordinator = RoundCoordinator(SequentialConsistency(2), 2)
    coordinator.init(0, np.zeros(1))
    coordinator.push(0, 0, np.array([1.0]))
    coordinator.push(0, 0, np.array([10.0]))  # worker 0 runs two rounds ahead
    assert coordinator.rounds(0) == ([2, 0], [0, 0])
    coordinator.push(0, 1, np.array([100.0]))
    assert coordinator.pull(0, 1)[0] == 101.0  # round 0 only
    coordinator.push(0, 1, np.array([1000.0]))
    assert coordinator.pull(0, 0)[0] == 1010.0


# -- the models in the store ------------------------------------------------------------


def test_the_store_takes_its_model_from_config_and_arguments():
    assert isinstance(create("local").consistency_model, SequentialConsistency)
    with config.override(consistency="eventual"):
        assert isinstance(create("device").consistency_model, EventualConsistency)
    model = create("local", consistency="bounded_delay", tau=3).consistency_model
    assert isinstance(model, BoundedDelayConsistency) and model.tau == 3


class EverySecondPush:
    """A third-party model: applies a key's pushes two at a time (their sum)."""

    def __init__(self, num_workers=1, **options):
        self.num_workers = num_workers

    def ready_to_apply(self, pushes_received):
        return pushes_received >= 2


class EverySecondPushThenRead(EverySecondPush):
    """Like EverySecondPush, but a pull waits for the worker's pushes to be applied."""

    def pull_ready(self, worker_round, slowest_round):
        return slowest_round >= worker_round


class _EverySecondPlugin:
    @hookimpl
    def mxkit_consistency_models(self):
        yield ConsistencySpec(name="every_second", model=EverySecondPush)
        yield ConsistencySpec(name="every_second_then_read", model=EverySecondPushThenRead)


@pytest.fixture
def every_second_plugin():
    from mxkit.core import plugins

    name = plugins.register_plugin(_EverySecondPlugin(), name="test-every-second")
    yield
    plugins.unregister_plugin(name)


@pytest.mark.parametrize("kvtype", ["local", "device"])
def test_a_plugin_model_that_batches_pushes_drives_the_store(kvtype, every_second_plugin):
    kv = create(kvtype, consistency="every_second")
    kv.init(0, nd.zeros((2,)))
    kv.push(0, [nd.array([1.0, 2.0]), nd.array([1.0, 1.0])])
    out = nd.zeros((2,))
    kv.pull(0, out=out)  # the model has no pull_ready: the old value is answered
    np.testing.assert_array_equal(out.asnumpy(), [0.0, 0.0])
    kv.push(0, nd.array([10.0, 10.0]))
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [12.0, 13.0])


def test_a_single_worker_store_refuses_a_pull_its_model_would_wait_for_forever(every_second_plugin):
    kv = create("local", consistency="every_second_then_read")
    kv.init(0, nd.zeros((1,)))
    kv.push(0, nd.ones((1,)))
    out = nd.zeros((1,))
    with pytest.raises(KVStoreError, match=r"pull of key 0: the consistency model EverySecondPushThenRead waits "
                                           r"for more pushes.*push again"):
        kv.pull(0, out=out)
    kv.push(0, nd.ones((1,)))
    kv.pull(0, out=out)
    assert out.asnumpy()[0] == 2.0


def test_builtin_models_and_compressors_are_registered_plugins():
    from mxkit.core import plugins

    assert {"sequential", "eventual", "bounded_delay"} <= set(plugins.registry("consistency").names())
    assert {"none", "2bit", "fp16", "topk"} <= set(plugins.registry("compressor").names())
    origin = dict((name, info) for name, _, info in plugins.registry("compressor").items())["2bit"]
    assert origin.distribution == "mxkit-kvstore"


def test_the_plugin_registry_does_not_load_the_store():
    import subprocess
    import sys

    code = ("import sys\nfrom mxkit.core import plugins\n"
            "names = plugins.registry('compressor').names() + plugins.registry('consistency').names()\n"
            "assert '2bit' in names and 'sequential' in names, names\n"
            "assert 'numpy' not in sys.modules and 'mxkit.kvstore.store' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_coordinator_runs_on_ndarrays_with_an_optimizer(momentum_sgd):
    from mxkit.kvstore.updater import OptimizerUpdater

    coordinator = RoundCoordinator(SequentialConsistency(2), 2, OptimizerUpdater(momentum_sgd(0.5, 0.0)))
    coordinator.init("w", nd.ones((3,)))
    coordinator.push("w", 0, nd.array([1.0, 2.0, 3.0]))
    coordinator.push("w", 1, nd.array([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(coordinator.pull("w", 1).asnumpy(), [0.0, 0.0, 0.0])  # 1 - 0.5 * (sum)
    plain = RoundCoordinator(EventualConsistency(2), 2)
    plain.init(0, nd.zeros((2,)))
    plain.push(0, 1, nd.array([4.0, 5.0]))
    np.testing.assert_array_equal(plain.pull(0, 0).asnumpy(), [4.0, 5.0])
