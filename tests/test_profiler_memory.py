"""profile_memory across packages: NDArray storage and executor pools as bytes-in-use counters."""

import gc

import numpy as np
import pytest
from mxkit import mx
from mxkit.engine import profiler


@pytest.fixture(autouse=True)
def fresh_profiler():
    profiler.reset()
    mx.nd.waitall()
    gc.collect()
    yield
    profiler.reset()


def counter_values(trace, kind):
    """The successive values of the ``kind`` series of the memory counter of cpu(0) (each
    counter event carries every series of its device: a value repeats while another changes)."""
    pids = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    values = []
    for event in trace["traceEvents"]:
        if event["ph"] == "C" and event["name"] == "memory" and pids[event["pid"]] == "cpu(0)":
            value = event["args"].get(kind)
            if value is not None and (not values or values[-1] != value):
                values.append(value)
    return values


def test_ndarray_storage_is_counted_until_the_array_and_its_views_are_gone():
    profiler.set_config(profile_memory=True)
    profiler.set_state("run")
    a = mx.nd.ones((64, 32), dtype="float32")           # 8192 bytes
    b = mx.nd.zeros((10,), dtype="float64")             # 80 bytes
    view = a[2:4]                                        # shares a's storage: nothing new
    mx.nd.waitall()
    base = counter_values(profiler.trace(), "ndarray")
    assert base == [8192, 8192 + 80]
    del a
    gc.collect()
    assert counter_values(profiler.trace(), "ndarray") == base  # the view keeps the storage
    del view
    gc.collect()
    del b
    gc.collect()
    values = counter_values(profiler.trace(), "ndarray")
    assert values[-2:] == [80, 0]
    profiler.set_state("stop")


@pytest.mark.filterwarnings("ignore:graph pass:UserWarning")
def test_executor_pools_are_counted_at_bind_and_freed_with_the_executor():
    x = mx.sym.Variable("x")
    net = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=16, name="fc"), act_type="relu")
    profiler.set_config(profile_all=True)
    profiler.set_state("run")
    executor = net.simple_bind(mx.cpu(), x=(8, 32))
    pool_bytes = sum(max(pool.size, 1) for pool in executor.memory_plan.pools)
    assert pool_bytes > 0
    assert counter_values(profiler.trace(), "executor_pool") == [pool_bytes]
    executor.forward(x=np.ones((8, 32), dtype="float32"))
    executor.outputs[0].wait_to_read()
    del executor
    gc.collect()
    assert counter_values(profiler.trace(), "executor_pool")[-1] == 0
    names = [e["name"] for e in profiler.trace()["traceEvents"] if e.get("cat") == "operator"]
    assert any(name.startswith("forward[") for name in names)


def test_memory_is_not_counted_when_profile_memory_is_off():
    profiler.set_config(profile_memory=False)
    profiler.set_state("run")
    a = mx.nd.ones((100,))
    mx.nd.waitall()
    assert counter_values(profiler.trace(), "ndarray") == []
    assert a.shape == (100,)


def test_the_facade_name_is_the_engine_profiler():
    assert mx.profiler is profiler


def test_ndarray_operators_appear_with_the_vars_of_their_arrays():
    profiler.set_config(profile_all=True)
    profiler.set_state("run")
    a = mx.nd.ones((8, 8))
    b = a + 1
    c = b * 2
    c.wait_to_read()
    profiler.set_state("stop")
    ops = {e["name"]: e["args"] for e in profiler.trace()["traceEvents"] if e.get("cat") == "operator"}
    assert ops["_plus_scalar"]["reads"] == [a.var.id] and ops["_plus_scalar"]["writes"] == [b.var.id]
    assert ops["_mul_scalar"]["reads"] == [b.var.id] and ops["_mul_scalar"]["writes"] == [c.var.id]
    np.testing.assert_array_equal(c.asnumpy(), np.full((8, 8), 4.0))
