"""Pushes and pulls are engine operations: ordered by priority, never blocking the caller."""

import threading

import mxkit.engine as engine
import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core import cpu
from mxkit.kvstore import create
from mxkit.kvstore.merge import DevicePlacer


class RecordingEngine:
    """Wraps an engine; records the name of every operation when it runs."""

    def __init__(self, inner):
        self.inner = inner
        self.ran = []

    def push(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False):
        def run():
            self.ran.append(name)
            fn()

        self.inner.push(run, reads, writes, ctx, priority, name, copy)

    def __getattr__(self, attribute):
        return getattr(self.inner, attribute)


@pytest.fixture
def one_worker_engine():
    """A one-thread engine as the process engine, wrapped to record what runs."""
    recording = RecordingEngine(engine.create("threaded", num_workers=1))
    previous = engine.set_engine(recording)
    yield recording
    engine.set_engine(previous)
    recording.inner.shutdown()


def test_pulls_run_in_priority_order(one_worker_engine):
    kv = create("local")
    keys = [0, 1, 2, 3]
    kv.init(keys, [nd.full((4,), float(k)) for k in keys])
    outs = {k: nd.zeros((4,)) for k in keys}
    nd.waitall()
    gate = threading.Event()
    one_worker_engine.push(lambda: gate.wait(10), name="gate")  # holds the only worker
    # MXNet's Module pulls layer i with priority -i: the first layer's weights first
    for key, priority in [(2, -2), (0, 0), (3, -3), (1, -1)]:
        kv.pull(key, out=outs[key], priority=priority)
    gate.set()
    nd.waitall()
    ran = [name for name in one_worker_engine.ran if name.startswith("kvstore")]
    assert ran == [f"kvstore.pull({key})" for key in keys]
    for key in keys:
        np.testing.assert_array_equal(outs[key].asnumpy(), np.full(4, float(key)))


def test_pushes_run_in_priority_order_and_pulls_follow_their_push(one_worker_engine):
    kv = create("local")
    keys = ["a", "b", "c"]
    kv.init(keys, [nd.zeros((50000,)) for _ in keys])  # above the batching bound: one operation per key
    grads = {key: [nd.ones((50000,)), nd.ones((50000,))] for key in keys}
    outs = {key: nd.zeros((50000,)) for key in keys}
    nd.waitall()
    gate = threading.Event()
    one_worker_engine.push(lambda: gate.wait(10), name="gate")
    one_worker_engine.ran.clear()
    for key, priority in [("c", -2), ("a", 0), ("b", -1)]:
        kv.push(key, grads[key], priority=priority)
    for key, priority in [("c", -2), ("a", 0), ("b", -1)]:
        kv.pull(key, out=outs[key], priority=priority)
    gate.set()
    nd.waitall()
    ran = [name for name in one_worker_engine.ran if name.startswith("kvstore")]
    assert ran.index("kvstore.push('a')") < ran.index("kvstore.push('b')") < ran.index("kvstore.push('c')")
    for key in keys:
        assert ran.index(f"kvstore.push({key!r})") < ran.index(f"kvstore.pull({key!r})")
        np.testing.assert_array_equal(outs[key].asnumpy(), np.full(50000, 2.0))


@pytest.mark.parametrize("kvtype", ["local", "device"])
def test_push_and_pull_return_before_their_inputs_are_computed(kvtype):
    kv = create(kvtype)
    kv.init(0, nd.zeros((3,)))
    grads = [nd.zeros((3,), ctx=cpu(d)) for d in range(2)]
    gate = threading.Event()
    eng = engine.get()

    timed_out = []

    def slow_producer():  # stands for a backward pass still writing the gradients
        if not gate.wait(10):
            timed_out.append(True)  # the caller was blocked until the gate gave up
        grads[0]._data[...] = 1.0
        grads[1]._data[...] = 2.0

    eng.push(slow_producer, (), [g.var for g in grads], cpu(0), 0, "backward")
    kv.push(0, grads)  # must not wait for the producer
    out = nd.zeros((3,), ctx=cpu(1))
    kv.pull(0, out=out)
    assert not gate.is_set()
    gate.set()
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 3.0, 3.0])
    assert not timed_out


def test_device_placer_puts_the_largest_keys_first_on_the_least_loaded_device():
    placer = DevicePlacer()
    sizes = [("a", 10), ("b", 40), ("c", 30), ("d", 20), ("e", 5)]
    placement = placer.place(sizes, ["g0", "g1"])
    # b(40)->g0, c(30)->g1, d(20)->g1 (30<40), a(10)->g0 (40<50), e(5)->g1 (50 = 50: first listed)
    assert placement == {"b": "g0", "c": "g1", "d": "g1", "a": "g0", "e": "g0"}
    assert placer.load == {"g0": 55, "g1": 50}


def test_device_store_merges_on_the_pushed_devices_spreading_keys():
    kv = create("device")
    sizes = {"big": 4000, "mid": 3000, "small": 1000, "tiny": 500}
    kv.init(list(sizes), [nd.zeros((n,)) for n in sizes.values()])
    devices = [cpu(1), cpu(2)]
    kv.push("big", [nd.ones((4000,), ctx=d) for d in devices])
    homes = {key: kv._entries[key].value.context for key in sizes}
    # every key is placed at the first push: big -> cpu(1), mid -> cpu(2), small -> cpu(2), tiny -> cpu(1)
    assert homes == {"big": cpu(1), "mid": cpu(2), "small": cpu(2), "tiny": cpu(1)}
    local = create("local")
    local.init(0, nd.zeros((3,), ctx=cpu(3)))
    local.push(0, [nd.ones((3,), ctx=cpu(3))])
    assert local._entries[0].value.context == cpu(0)  # local sums on the CPU


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(1, 10**6), min_size=1, max_size=30), devices=st.integers(1, 4))
def test_device_placer_balances_within_the_largest_key(sizes, devices):
    placer = DevicePlacer()
    names = [f"d{i}" for i in range(devices)]
    placement = placer.place(list(enumerate(sizes)), names)
    assert sorted(placement) == list(range(len(sizes)))
    loads = [sum(size for key, size in enumerate(sizes) if placement[key] == name) for name in names]
    assert loads == [placer.load[name] for name in names]
    if len(sizes) >= devices:
        # greedy least-loaded placement of the largest first: no device is more than one key
        # (the largest) above another, and no device is left empty
        assert max(loads) - min(loads) <= max(sizes) and min(loads) > 0


def test_a_failed_gradient_surfaces_at_the_wait_on_the_pulled_array():
    from mxkit.core.errors import MXKitError

    kv = create("local")
    kv.init(0, nd.zeros((2,)))
    grad = nd.zeros((2,))

    def broken_backward():
        raise RuntimeError("backward exploded")

    engine.get().push(broken_backward, (), [grad.var], cpu(0), 0, "broken_backward")
    kv.push(0, [grad, nd.ones((2,), ctx=cpu(1))])
    out = nd.zeros((2,))
    kv.pull(0, out=out)
    with pytest.raises(MXKitError, match="broken_backward") as caught:
        out.asnumpy()
    assert "backward exploded" in repr(caught.value.__cause__) or "backward exploded" in str(caught.value)
    # as for any array written by a failed operation, mx.nd.waitall() clears the error: the key works again
    nd.waitall()
    kv.push(0, [nd.ones((2,)), nd.ones((2,), ctx=cpu(1))])
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [2.0, 2.0])


def test_pushpull_writes_its_targets_in_the_sums_own_operation(one_worker_engine):
    kv = create("local")
    kv.init([0, 1], [nd.zeros((3,)), nd.zeros((40000,))])
    small = [nd.ones((3,), ctx=cpu(d)) for d in range(2)]
    large = [nd.ones((40000,), ctx=cpu(d)) for d in range(2)]
    nd.waitall()
    one_worker_engine.ran.clear()
    kv.pushpull([0, 1], [small, large])
    kv.set_updater(lambda key, grad, weight: weight.__setitem__(slice(None), grad * 10))
    out = nd.zeros((3,))
    kv.pushpull(0, small, out=out)  # with an updater: push, update, then pull
    nd.waitall()
    ran = [name for name in one_worker_engine.ran if name.startswith("kvstore")]
    assert ran[:2] == ["kvstore.pushpull(1)", "kvstore.pushpull(0)"]  # the large key has its own operation
    assert ran[2:] == ["kvstore.push(0)", "kvstore.pull(0)"]
    for array in small:
        np.testing.assert_array_equal(array.asnumpy(), np.full(3, 2.0))  # the first pushpull, in place
    np.testing.assert_array_equal(out.asnumpy(), np.full(3, 40.0))  # 10 * (2 + 2)
    np.testing.assert_array_equal(large[1].asnumpy(), np.full(40000, 2.0))
