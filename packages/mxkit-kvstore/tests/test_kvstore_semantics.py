"""The store against a numpy model of MXNet's KVStore, for random programs of init/push/pull."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core import cpu
from mxkit.kvstore import create

SHAPES = [(3,), (2, 5), (70, 300)]  # the last one is above the batching bound: its own engine ops


def scaled_add(key, grad, weight):
    """An updater: weight = 0.5 * weight + grad (written with NDArray operations)."""
    weight[:] = weight * 0.5 + grad


def numpy_scaled_add(grad, weight):
    return (np.float32(0.5) * weight + grad).astype(np.float32)


def numpy_momentum_step(grad, weight, state, lr=0.1, momentum=0.9):
    state = (state * np.float32(momentum) - grad * np.float32(lr)).astype(np.float32)
    return (weight + state).astype(np.float32), state


def small_ints(draw, shape):
    return np.array(draw(st.lists(st.integers(-8, 8), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape)))), dtype=np.float32).reshape(shape)


@st.composite
def programs(draw):
    num_keys = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(num_keys)]
    num_devices = draw(st.integers(1, 4))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        key = draw(st.integers(0, num_keys - 1))
        kind = draw(st.sampled_from(["push", "pull", "pushpull", "pushpull_in_place"]))
        if kind != "pull":
            # large shapes get seeded random data (drawing 21000 ints is slow); small ones from hypothesis
            if shapes[key] == SHAPES[-1]:
                seed = draw(st.integers(0, 2**16))
                rng = np.random.default_rng(seed)
                grads = [rng.integers(-8, 9, shapes[key]).astype(np.float32) for _ in range(num_devices)]
            else:
                grads = [small_ints(draw, shapes[key]) for _ in range(num_devices)]
            steps.append((kind, key, grads))
        else:
            steps.append(("pull", key, None))
    return shapes, num_devices, steps


def run_program(kvtype, shapes, num_devices, steps, mode, string_keys, optimizer_class):
    kv = create(kvtype)
    names = [f"w{i}" if string_keys else i * 7 for i in range(len(shapes))]
    model = {}
    states = {}
    optimizer = optimizer_class() if mode == "optimizer" else None
    if mode == "updater":
        kv.set_updater(scaled_add)
    elif mode == "optimizer":
        kv.set_optimizer(optimizer)
    rng = np.random.default_rng(len(steps))
    for i, shape in enumerate(shapes):
        initial = rng.integers(-4, 5, shape).astype(np.float32)
        kv.init(names[i], nd.array(initial, ctx=cpu(i % num_devices)))
        model[i] = initial
    for kind, key, grads in steps:
        if kind != "pull":
            values = [nd.array(g, ctx=cpu(d)) for d, g in enumerate(grads)]
            outs = [nd.zeros(shapes[key], ctx=cpu(d)) for d in range(num_devices)]
            if kind == "push":
                kv.push(names[key], values)
            elif kind == "pushpull":
                kv.pushpull(names[key], values, out=outs)
            else:
                kv.pushpull(names[key], values)  # the pushed arrays receive the result
                outs = values
            total = grads[0].copy()
            for g in grads[1:]:
                total = (total + g).astype(np.float32)
            if mode == "plain":
                model[key] = total
            elif mode == "updater":
                model[key] = numpy_scaled_add(total, model[key])
            else:
                state = states.get(key, np.zeros(shapes[key], np.float32))
                model[key], states[key] = numpy_momentum_step(total, model[key], state)
            if kind != "push":
                for out in outs:
                    np.testing.assert_allclose(out.asnumpy(), model[key], rtol=1e-6, atol=1e-5)
        else:
            outs = [nd.zeros(shapes[key], ctx=cpu(d)) for d in range(num_devices)]
            kv.pull(names[key], out=outs)
            for out in outs:
                np.testing.assert_allclose(out.asnumpy(), model[key], rtol=1e-6, atol=1e-5)
    # the final state of every key
    for i, shape in enumerate(shapes):
        out = nd.zeros(shape, ctx=cpu(0))
        kv.pull(names[i], out=out)
        np.testing.assert_allclose(out.asnumpy(), model[i], rtol=1e-6, atol=1e-5)
    if optimizer is not None:
        pushed = {names[key] for kind, key, _ in steps if kind != "pull"}
        assert sorted(optimizer.created, key=str) == sorted(pushed, key=str)  # one state per key


@pytest.mark.parametrize("kvtype", ["local", "device"])
@pytest.mark.parametrize("mode", ["plain", "updater", "optimizer"])
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program=programs(), string_keys=st.booleans())
def test_random_programs_match_the_numpy_model(kvtype, mode, program, string_keys, momentum_sgd):
    shapes, num_devices, steps = program
    run_program(kvtype, shapes, num_devices, steps, mode, string_keys, momentum_sgd)


@pytest.mark.parametrize("kvtype", ["local", "device"])
def test_lists_of_keys_and_repeated_keys_group_like_mxnet(kvtype):
    kv = create(kvtype)
    kv.init([1, 2], [nd.zeros((2,)), nd.zeros((3,))])
    a, b, c = nd.array([1.0, 2.0], ctx=cpu(0)), nd.array([10.0, 20.0], ctx=cpu(1)), nd.ones((3,), ctx=cpu(2))
    kv.push([1, 2, 1], [a, c, b])  # key 1 twice: its two values are summed
    out1, out2 = nd.zeros((2,)), [nd.zeros((3,), ctx=cpu(i)) for i in range(2)]
    kv.pull([1, 2], out=[out1, out2])
    np.testing.assert_array_equal(out1.asnumpy(), [11.0, 22.0])
    for out in out2:
        np.testing.assert_array_equal(out.asnumpy(), np.ones(3))


@pytest.mark.parametrize("kvtype", ["local", "device"])
def test_pushpull_and_broadcast(kvtype):
    kv = create(kvtype)
    values = [nd.array([float(i), 1.0], ctx=cpu(i)) for i in range(3)]
    kv.broadcast("w", nd.array([5.0, 6.0]), out=values)
    for value in values:
        np.testing.assert_array_equal(value.asnumpy(), [5.0, 6.0])
    grads = [nd.array([1.0, float(i)], ctx=cpu(i)) for i in range(3)]
    kv.pushpull("w", grads)  # no out: the pushed arrays receive the result
    for grad in grads:
        np.testing.assert_array_equal(grad.asnumpy(), [3.0, 3.0])
    outs = [nd.zeros((2,), ctx=cpu(i)) for i in range(2)]
    kv.pushpull("w", [nd.ones((2,))], out=outs)
    for out in outs:
        np.testing.assert_array_equal(out.asnumpy(), [1.0, 1.0])


def test_init_copies_the_value_and_push_does_not_alias_the_pushed_array():
    kv = create("device")
    initial = nd.array([1.0, 2.0])
    kv.init(0, initial)
    initial[:] = 100.0  # the store kept a copy
    out = nd.zeros((2,))
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [1.0, 2.0])
    grad = nd.array([3.0, 4.0])
    kv.push(0, grad)  # one device: MXNet aliased the pushed array here; mxkit copies
    grad[:] = -1.0
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 4.0])


def test_describes_itself_like_mxnet():
    kv = create("local")
    assert (kv.type, kv.rank, kv.num_workers) == ("local", 0, 1)
    # as in MXNet, a store reports the name it was made with, aliases included
    assert create("local_allreduce_device").type == "local_allreduce_device"
    assert create("local_allreduce_cpu").type == "local_allreduce_cpu"
    kv.barrier()
    assert kv.is_capable(kv.OPTIMIZER) and not kv.is_capable("sparse")


def test_the_facade_maps_mx_kv_to_this_package():
    pytest.importorskip("mxkit.mx")
    from mxkit import mx

    assert mx.kv.create is create and mx.kvstore.create is create
