"""A backward pass over a tape of a shape seen before replays the operator calls captured from the
general walk (mxkit.ndarray.backward_replay). The replayed pass must store the same bits as the
walk, step after step of a training loop (gradients and the weights updated from them), keep the
walk's errors and its release of spent nodes, and leave to the walk every tape it cannot repeat."""

import itertools
from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray import autograd, backward_replay
from mxkit.ndarray.registry import get_registry

mx = SimpleNamespace(nd=mxkit.ndarray, autograd=autograd, cpu=mxkit.core.cpu)


@pytest.fixture
def replays(monkeypatch):
    """The replayed passes of the test (starting with no plan)."""
    backward_replay.clear()
    made = []
    real = backward_replay.replay

    def counting(*args):
        made.append(args[0])
        return real(*args)

    monkeypatch.setattr(backward_replay, "replay", counting)
    yield made
    backward_replay.clear()


# -- random programs: a training loop, replayed against the general walk -------------------

OPS = ("fc", "relu", "tanh", "sigmoid", "add", "mul", "sub", "scale", "softrelu")
program_strategy = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50)), min_size=1,
                            max_size=8)


def run_loop(programs, schedule, grad_reqs, batch, width, seed, replay, retain=False):
    """Weights and gradients after a training loop whose step ``i`` runs ``programs[schedule[i]]``
    (tapes of several shapes in turn: each must find its own plan)."""
    autograd.replay_backward = replay
    try:
        rng = np.random.default_rng(seed)
        weights = []
        for req in grad_reqs:
            weight = mx.nd.array((rng.standard_normal((width, width)) / np.sqrt(width)).astype("float32"))
            weight.attach_grad(req)
            weights.append(weight)
        bias = mx.nd.array(rng.standard_normal(width).astype("float32"))
        bias.attach_grad()
        data = mx.nd.array(rng.standard_normal((batch, width)).astype("float32"))
        for which in schedule:
            program = programs[which % len(programs)]
            with autograd.record():
                pool = [data]
                for kind, i, j in program:
                    x, y = pool[i % len(pool)], pool[j % len(pool)]
                    if kind == "fc":
                        out = mx.nd.FullyConnected(x, weights[j % len(weights)], bias, num_hidden=width)
                    elif kind in ("relu", "tanh", "sigmoid", "softrelu"):
                        out = mx.nd.Activation(x, act_type=kind)
                    elif kind == "add":
                        out = x + y
                    elif kind == "mul":
                        out = x * y
                    elif kind == "sub":
                        out = x - y
                    else:
                        out = x * 0.5 + 1.0
                    pool.append(out)
                # every weight takes part, so that each has a gradient every step
                head = pool[-1]
                for weight in weights:
                    head = head + mx.nd.FullyConnected(data, weight, bias, num_hidden=width)
            head.backward(retain_graph=retain)
            for weight in (*weights, bias):
                weight -= weight.grad * 0.01
        return [w.asnumpy() for w in (*weights, bias)] + [w.grad.asnumpy() for w in (*weights, bias)]
    finally:
        autograd.replay_backward = True


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(programs=st.lists(program_strategy, min_size=1, max_size=3),
       schedule=st.lists(st.integers(0, 2), min_size=2, max_size=7),
       grad_reqs=st.lists(st.sampled_from(["write", "add"]), min_size=1, max_size=3),
       batch=st.integers(1, 4), width=st.integers(1, 5), seed=st.integers(0, 2**16), retain=st.booleans())
def test_replayed_training_loop_equals_the_general_walk_bitwise(replays, programs, schedule, grad_reqs, batch, width,
                                                                seed, retain):
    # (the fixture runs once for every example: each example starts from no plan here)
    walked = run_loop(programs, schedule, grad_reqs, batch, width, seed, replay=False, retain=retain)
    backward_replay.clear()
    replays.clear()
    replayed = run_loop(programs, schedule, grad_reqs, batch, width, seed, replay=True, retain=retain)
    for a, b in zip(walked, replayed):
        np.testing.assert_array_equal(a, b)  # bit for bit (NaN where the walk has NaN)


@pytest.mark.parametrize("programs", [
    [[("fc", 0, 0), ("relu", 1, 0)], [("fc", 0, 0), ("tanh", 1, 0)]],  # parameters differ
    [[("fc", 0, 0), ("mul", 1, 1)], [("fc", 0, 0), ("mul", 1, 0)]],  # which arrays a node reads
    [[("fc", 0, 0), ("fc", 0, 1), ("sub", 1, 2)], [("fc", 0, 0), ("fc", 0, 1), ("sub", 2, 1)]],  # their order
    [[("fc", 0, 0)], [("fc", 0, 1)]],  # which variable (with which grad_req)
], ids=["params", "inputs", "order", "variable"])
def test_tapes_that_differ_only_in_one_respect_get_plans_of_their_own(replays, programs):
    args = (programs, [0, 1, 0, 1, 0, 1], ["write", "add"], 3, 4, 7)
    walked = run_loop(*args, replay=False)
    replayed = run_loop(*args, replay=True)
    assert len(replays) == 4
    for a, b in zip(walked, replayed):
        np.testing.assert_array_equal(a, b)


def test_a_loop_of_one_tape_shape_replays_every_step_after_the_first(replays):
    program = [("fc", 0, 0), ("relu", 1, 0), ("mul", 2, 1), ("fc", 3, 1), ("scale", 4, 0)]
    run_loop([program], [0] * 4, ["write", "add"], 3, 4, 0, replay=True)
    assert len(replays) == 3


def _mlp_step(weights, data, label):
    with autograd.record():
        h = data
        for i in range(len(weights) // 2):
            h = mx.nd.FullyConnected(h, weights[2 * i], weights[2 * i + 1], num_hidden=weights[2 * i].shape[0])
            if i < len(weights) // 2 - 1:
                h = mx.nd.Activation(h, act_type="relu")
        out = mx.nd.SoftmaxOutput(h, label)
    out.backward()
    return out


def _mlp(rng, sizes=(6, 5, 4, 3), batch=4):
    weights = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        weights.append(mx.nd.array(rng.standard_normal((fan_out, fan_in)).astype("float32")))
        weights.append(mx.nd.array(rng.standard_normal(fan_out).astype("float32")))
    for weight in weights:
        weight.attach_grad()
    data = mx.nd.array(rng.standard_normal((batch, sizes[0])).astype("float32"))
    label = mx.nd.array(rng.integers(0, sizes[-1], batch).astype("float32"))
    return weights, data, label


def test_an_mlp_step_with_momentum_sgd_equals_the_walk_after_many_steps(replays):
    def train(replay):
        autograd.replay_backward = replay
        try:
            weights, data, label = _mlp(np.random.default_rng(3))
            moms = [mx.nd.zeros(w.shape) for w in weights]
            for _ in range(6):
                _mlp_step(weights, data, label)
                for w, m in zip(weights, moms):
                    mx.nd.sgd_mom_update(w, w.grad, m, lr=0.1, momentum=0.9, wd=1e-3, out=w)
            return [w.asnumpy() for w in weights]
        finally:
            autograd.replay_backward = True

    walked = train(False)
    replayed = train(True)
    assert len(replays) == 5
    for a, b in zip(walked, replayed):
        np.testing.assert_array_equal(a, b)


# -- what the replay keeps of the walk -------------------------------------------------------

def test_a_replayed_pass_refuses_a_spent_graph_and_releases_its_nodes(replays):
    weights, data, label = _mlp(np.random.default_rng(4))
    _mlp_step(weights, data, label)
    out = _mlp_step(weights, data, label)
    assert len(replays) == 1
    kind, (_, _, inputs, _, _) = autograd.recorded_origin(out)
    assert kind == "operator" and inputs == []  # released as the walk releases a spent node
    with pytest.raises(autograd.AutogradError, match="already differentiated without retain_graph"):
        out.backward()


def test_grad_and_head_gradients_are_replayed_with_their_own_plans(replays):
    x = mx.nd.array([[1.0, -2.0], [3.0, 0.5]])
    x.attach_grad()
    results = []
    for scale in (1.0, 2.0, 3.0):
        with autograd.record():
            y = mx.nd.Activation(x * x, act_type="tanh")
        head = mx.nd.array([[scale, 1.0], [0.5, scale]])
        (gx,) = autograd.grad(y, [x], head_grads=head)
        results.append(gx.asnumpy())
    assert len(replays) == 2
    xv = np.array([[1.0, -2.0], [3.0, 0.5]], dtype=np.float32)
    for scale, got in zip((1.0, 2.0, 3.0), results):
        head = np.array([[scale, 1.0], [0.5, scale]], dtype=np.float32)
        # 1 - tanh(v)**2 cancels near 1 in float32: an absolute error of a few ulp(1) times |head * 2x| <= 18
        np.testing.assert_allclose(got, head * (1 - np.tanh(xv * xv) ** 2) * 2 * xv, rtol=1e-5, atol=18 * 2.4e-7)


def test_a_replaced_gradient_function_is_called_not_replayed(replays, monkeypatch):
    weights, data, label = _mlp(np.random.default_rng(5))
    _mlp_step(weights, data, label)
    _mlp_step(weights, data, label)
    assert len(replays) == 1
    op = get_registry().get("Activation")
    calls = []
    real = op.gradient

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(op, "gradient", counting)
    _mlp_step(weights, data, label)
    assert len(calls) == 2 and len(replays) == 1


def test_tapes_the_replay_cannot_repeat_keep_the_general_walk(replays):
    class Square(autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x

        def backward(self, dy):
            (x,) = self.saved_tensors
            return dy * x * 2

    x = mx.nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    for _ in range(3):  # a Function's backward is the user's Python: never replayed
        with autograd.record():
            y = Square()(x) + x
        y.backward()
        np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 5.0, 7.0])
    assert replays == []



def test_a_pass_that_makes_a_view_or_a_raw_push_is_not_captured(replays, monkeypatch):
    op = get_registry().get("Activation")
    real = op.gradient

    def through_a_view(F, params, inputs, outputs, out_grads):
        (grad,) = real(F, params, inputs, outputs, out_grads)
        return [grad.reshape(grad.shape)]  # a view of the result: nothing a replay would repeat

    monkeypatch.setattr(op, "gradient", through_a_view)
    weights, data, label = _mlp(np.random.default_rng(6))
    walked = []
    for _ in range(3):
        _mlp_step(weights, data, label)
        walked.append([w.grad.asnumpy() for w in weights])
    assert replays == []
    for grads in walked[1:]:
        for a, b in zip(walked[0], grads):
            np.testing.assert_array_equal(a, b)

    def through_a_raw_push(F, params, inputs, outputs, out_grads):
        (grad,) = real(F, params, inputs, outputs, out_grads)
        copy = mxkit.ndarray.zeros(grad.shape)
        mxkit.ndarray.invoke.push_raw(lambda: copy.storage.__setitem__(Ellipsis, grad.storage), [grad], [copy],
                                      copy.context, "copy", overwrites=True)
        return [copy]

    monkeypatch.setattr(op, "gradient", through_a_raw_push)
    for _ in range(3):
        _mlp_step(weights, data, label)
        for a, b in zip(walked[0], [w.grad.asnumpy() for w in weights]):
            np.testing.assert_array_equal(a, b)
    assert replays == []


def test_threads_replaying_at_once_each_get_the_walks_bits(replays):
    # the capture is the running thread's; plans are shared: four loops on one tape shape at once
    import threading

    def train(seed, replay, results):
        autograd.replay_backward = replay  # (one value for every thread below: set before they start)
        weights, data, label = _mlp(np.random.default_rng(seed))
        for _ in range(5):
            _mlp_step(weights, data, label)
            for w in weights:
                w -= w.grad * 0.1
        results[seed] = [w.asnumpy() for w in weights]

    walked: dict = {}
    for seed in range(4):
        train(seed, False, walked)
    replayed: dict = {}
    autograd.replay_backward = True
    threads = [threading.Thread(target=train, args=(seed, True, replayed)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(replayed) == [0, 1, 2, 3] and len(replays) >= 4 * (5 - 1)  # (each may capture its first)
    for seed in range(4):
        for a, b in zip(walked[seed], replayed[seed]):
            np.testing.assert_array_equal(a, b)


def test_an_operator_outside_the_registry_is_refused_without_asking_the_registry_for_its_name(monkeypatch):
    # a hybridized block's graph node is an OpDef of no registered name; get() of an unknown name
    # builds an error with close matches over every name, which cost milliseconds on every step
    import dataclasses

    registry = get_registry()
    outsider = dataclasses.replace(registry.get("relu"), name="_a_graph_of_no_registered_name")
    asked = []
    real_get = type(registry).get
    monkeypatch.setattr(type(registry), "get", lambda self, name: asked.append(name) or real_get(self, name))
    assert not backward_replay._op_replayable(outsider)
    assert asked == []
    assert backward_replay._op_replayable(registry.get("relu"))


# -- constants made once: the head gradient's ones ---------------------------------------------

def test_replays_reuse_the_head_gradients_ones_and_keep_the_walks_bits(replays, monkeypatch):
    from mxkit.ndarray import invoke as invoke_module

    real_invoke = invoke_module.invoke
    results, made = {}, {}
    for replay in (False, True):
        calls = made[replay] = []

        def counting(op, *args, calls=calls, **kwargs):
            calls.append(op.name)
            return real_invoke(op, *args, **kwargs)

        autograd.replay_backward = replay
        try:
            weights, data, label = _mlp(np.random.default_rng(3))
            grads = []
            for step in range(5):
                if step == 3:  # steps 4 and 5: the walk makes ones again, the replay reuses them
                    monkeypatch.setattr(invoke_module, "invoke", counting)
                _mlp_step(weights, data, label)
                grads.append([w.grad.asnumpy() for w in weights])
                for weight in weights:
                    weight -= weight.grad * 0.1
            results[replay] = grads
        finally:
            autograd.replay_backward = True
            monkeypatch.setattr(invoke_module, "invoke", real_invoke)
    for walked, replayed in zip(results[False], results[True]):
        for a, b in zip(walked, replayed):
            np.testing.assert_array_equal(a, b)
    assert len(replays) == 4
    assert made[False].count("_ones") == 2 and "_ones" not in made[True]


def test_tapes_of_one_signature_on_two_devices_each_get_their_own_constants(replays):
    """Two devices' tapes of the same shapes share a plan; the ones each replay reuses are its own
    device's (one device's array would make the other's backward operators fail)."""
    results = {}
    for replay in (False, True):
        autograd.replay_backward = replay
        try:
            models = [(_mlp(np.random.default_rng(5)), ctx) for ctx in (mx.cpu(0), mx.cpu(1))]
            placed = []
            for (weights, data, label), ctx in models:
                weights = [w.as_in_context(ctx) for w in weights]
                for weight in weights:
                    weight.attach_grad()
                placed.append((weights, data.as_in_context(ctx), label.as_in_context(ctx)))
            grads = []
            for _ in range(4):
                for weights, data, label in placed:
                    _mlp_step(weights, data, label)
                    grads.append([w.grad.asnumpy() for w in weights])
            results[replay] = grads
        finally:
            autograd.replay_backward = True
    for walked, replayed in zip(results[False], results[True]):
        for a, b in zip(walked, replayed):
            np.testing.assert_array_equal(a, b)
    assert len(replays) >= 6


def _step(name, inputs=(), outs=None, results=(0,), aux=False):
    op = SimpleNamespace(name=name, aux_names=("moving_mean",) if aux else ())
    return (op, {}, tuple(inputs), outs, tuple(results))


def test_only_steps_nothing_can_change_afterwards_count_as_constants():
    constant = _step("_ones", results=(10,))
    cases = [
        ([constant, _step("mul", (10, 1), results=(11,))], [], {0}),
        # a later step writes into the constant's array
        ([constant, _step("_plus", (1, 2), outs=(10,), results=(10,))], [], set()),
        # the constant is a gradient the caller receives
        ([constant], [(1, 10)], set()),
        # an operator that updates auxiliary states in place reads it
        ([constant, _step("BatchNorm", (10, 1), results=(11,), aux=True)], [], set()),
        # steps that read arrays, or write into given ones, are not constants
        ([_step("_copy", (1,), results=(11,)), _step("_ones", outs=(3,), results=(3,))], [], set()),
    ]
    for steps, leaves, expected in cases:
        assert set(backward_replay._constant_steps(steps, leaves)) == expected, (steps, leaves)
