"""A request's rounds applied in one batched optimizer call equal the same rounds applied
key by key, bit for bit.

Two in-process servers get the same pushes: one as it runs (a request of many keys goes to
the updater's ``update_all`` at once), one with the batch turned off (``apply_many`` unset,
so every key is its own ``updater(key, grad, weight)`` call, the serial reference). Their
values are compared with ``assert_array_equal`` after every step, for SGD with momentum,
Adam, an optimizer without an aggregated form and a plain updater function; and with
per-worker states on an asynchronous server.
"""

import numpy as np
import pytest

pytest.importorskip("mxkit.train")

SHAPES = [(3, 5), (7,), (2, 2, 2), (1,), (16,), (4, 3)] * 4  # 24 keys, more than one per shape


def optimizer(name):
    from mxkit.train import optimizer as opt

    if name == "sgd_momentum":
        return opt.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01)
    if name == "adam":
        return opt.create("adam", learning_rate=0.01, wd=0.001)
    if name == "unfused":
        return Halving()
    raise AssertionError(name)


class Halving:
    """A custom optimizer with MXNet's protocol and no aggregated update: ``w -= g/2``,
    counted in its state."""

    def create_state(self, index, weight):
        from mxkit.ndarray import zeros

        return zeros(weight.shape, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        assert not isinstance(index, (list, tuple))
        state += 1
        weight -= grad * 0.5


def custom_updater(key, grad, weight):
    weight[:] = weight * 0.99 - grad * 0.05


def make_server(updater_kind, batched, model="sequential", num_workers=1, states="shared"):
    from mxkit.kvstore.dist.server import ParameterServer
    from mxkit.kvstore.updater import OptimizerUpdater, PerWorkerUpdater

    server = ParameterServer(0, num_workers=num_workers)
    server.configure(0, model, {}, states)
    rng = np.random.default_rng(1)
    server.init([((key, 0), rng.standard_normal(shape).astype(np.float32)) for key, shape in enumerate(SHAPES)])
    if updater_kind == "function":
        server._set_update(custom_updater)
    elif updater_kind in ("sgd_momentum", "adam"):
        server.set_optimizer(0, optimizer(updater_kind).dumps())
    else:
        opt = optimizer(updater_kind)
        server._set_update(PerWorkerUpdater(opt, num_workers) if states == "per_worker" else OptimizerUpdater(opt))
    if not batched:
        server.table.apply_many = None
    return server


def steps(rng, count, num_workers):
    """``count`` requests: ``(rank, gradients of every key)``."""
    return [(int(rng.integers(num_workers)),
             [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]) for _ in range(count)]


def run(server, pushes, num_workers):
    rounds = [0] * num_workers
    for rank, grads in pushes:
        server.push_values(rank, 0, [((key, 0), rounds[rank]) for key in range(len(SHAPES))],
                           [grad.copy() for grad in grads], owned=True)
        rounds[rank] += 1
    return [server.value((key, 0)) for key in range(len(SHAPES))]


@pytest.mark.parametrize("updater_kind", ["sgd_momentum", "adam", "unfused", "function"])
def test_a_batched_update_of_many_keys_equals_per_key_updates_bit_for_bit(updater_kind):
    pushes = steps(np.random.default_rng(7), 5, 1)
    batched_server = make_server(updater_kind, batched=True)
    serial_server = make_server(updater_kind, batched=False)
    if updater_kind != "function":
        assert batched_server.table.apply_many is not None  # the batch is really taken
    batched, serial = run(batched_server, pushes, 1), run(serial_server, pushes, 1)
    initial = make_server(updater_kind, batched=False)
    for key, (got, expected) in enumerate(zip(batched, serial, strict=True)):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_array_equal(got, expected, err_msg=f"key {key}")
        assert not np.array_equal(got, initial.value((key, 0)))  # the updates did something


@pytest.mark.parametrize("updater_kind", ["sgd_momentum", "adam"])
def test_batched_updates_keep_per_worker_states_on_an_asynchronous_server(updater_kind):
    pushes = steps(np.random.default_rng(11), 6, 2)
    assert {rank for rank, _ in pushes} == {0, 1}
    batched = run(make_server(updater_kind, True, "eventual", 2, "per_worker"), pushes, 2)
    serial = run(make_server(updater_kind, False, "eventual", 2, "per_worker"), pushes, 2)
    shared = run(make_server(updater_kind, False, "eventual", 2, "shared"), pushes, 2)
    for got, expected in zip(batched, serial, strict=True):
        np.testing.assert_array_equal(got, expected)
    # the states really are per worker: one shared state gives other weights
    assert any(not np.array_equal(a, b) for a, b in zip(batched, shared, strict=True))
