"""Optimizers against hand-written numpy updates and against updates that MXNet 1.9.1 made."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import mx
from mxkit.core.errors import FormatError, MXKitError, ShapeError
from mxkit.train import optimizer as opt
from mxkit.train._registry import TrainingValueError, UnknownNameError

FIXTURES = Path(__file__).parent / "fixtures"


def _clip(values, bound):
    return np.clip(values, -bound, bound) if bound else values


# ---- numpy references, written from the formulas of MXNet 1.x's kernels ---------------------------


def ref_sgd(w, g, state, lr, wd, rescale=1.0, clip=None, momentum=0.0, **_):
    step = _clip(rescale * g, clip)
    if momentum == 0.0:
        return (1 - lr * wd) * w - lr * step, state
    mom = momentum * state - lr * wd * w - lr * step
    return w + mom, mom


def ref_nag(w, g, state, lr, wd, rescale=1.0, clip=None, momentum=0.0, **_):
    if momentum == 0.0:
        return ref_sgd(w, g, state, lr, wd, rescale, clip)
    step = _clip(rescale * g, clip)
    new_w = w + momentum * (momentum * state - lr * (step + wd * w)) - lr * (step + wd * w)
    # MXNet 1.9.1's momentum decays with the already-updated weight
    return new_w, momentum * state - lr * (step + wd * new_w)


def ref_adam(w, g, state, lr, wd, t, rescale=1.0, clip=None, beta1=0.9, beta2=0.999, epsilon=1e-8, **_):
    m, v = state
    step = _clip(rescale * g + wd * w, clip)
    m = beta1 * m + (1 - beta1) * step
    v = beta2 * v + (1 - beta2) * step ** 2
    lr_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    return w - lr_t * m / (np.sqrt(v) + epsilon), (m, v)


def ref_adagrad(w, g, history, lr, wd, rescale=1.0, clip=None, eps=1e-7, **_):
    step = _clip(rescale * g, clip)
    history = history + step ** 2
    return w - lr * (step / np.sqrt(history + eps) + wd * w), history


def ref_rmsprop(w, g, state, lr, wd, rescale=1.0, clip=None, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                centered=False, clip_weights=None, **_):
    step = _clip(rescale * g + wd * w, clip)
    if not centered:
        n = state[0] if isinstance(state, tuple) else state
        n = gamma1 * n + (1 - gamma1) * step ** 2
        w = w - lr * step / np.sqrt(n + epsilon)
        new_state = (n,)
    else:
        n, mean, delta = state
        n = gamma1 * n + (1 - gamma1) * step ** 2
        mean = gamma1 * mean + (1 - gamma1) * step
        delta = gamma2 * delta - lr * step / np.sqrt(n - mean ** 2 + epsilon)
        w = w + delta
        new_state = (n, mean, delta)
    return _clip(w, clip_weights), new_state


def ref_adadelta(w, g, state, lr, wd, rescale=1.0, clip=None, rho=0.9, epsilon=1e-5, **_):
    acc_g, acc_delta = state
    step = _clip(rescale * g, clip)
    acc_g = rho * acc_g + (1 - rho) * step ** 2
    delta = np.sqrt(acc_delta + epsilon) / np.sqrt(acc_g + epsilon) * step
    acc_delta = rho * acc_delta + (1 - rho) * delta ** 2
    return w - delta - wd * w, (acc_g, acc_delta)


def ref_signum(w, g, state, lr, wd, rescale=1.0, clip=None, momentum=0.9, wd_lh=0.0, **_):
    if momentum == 0.0:
        return (1 - lr * wd) * w - lr * np.sign(g), state
    mom = momentum * state - (1 - momentum) * (_clip(rescale * g, clip) + wd * w)
    return (1 - lr * wd_lh) * w + lr * np.sign(mom), mom


def ref_ftrl(w, g, state, lr, wd, rescale=1.0, clip=None, lamda1=0.01, beta=1.0, **_):
    z, n = state
    step = _clip(rescale * g, clip)
    z = z + step - (np.sqrt(n + step ** 2) - np.sqrt(n)) * w / lr
    n = n + step ** 2
    w = (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lamda1)
    return w, (z, n)


def _zeros(shape, count):
    return tuple(np.zeros(shape) for _ in range(count)) if count > 1 else np.zeros(shape)


# (optimizer name, constructor kwargs, reference, initial numpy state count)
CASES = [
    ("sgd", {"learning_rate": 0.1}, ref_sgd, 1),
    ("sgd", {"learning_rate": 0.1, "wd": 0.05, "clip_gradient": 0.4, "rescale_grad": 0.5}, ref_sgd, 1),
    ("sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01, "rescale_grad": 2.0, "clip_gradient": 1.0},
     ref_sgd, 1),
    ("nag", {"learning_rate": 0.1, "wd": 0.01}, ref_nag, 1),
    ("nag", {"learning_rate": 0.05, "momentum": 0.8, "wd": 0.02, "clip_gradient": 0.7}, ref_nag, 1),
    ("adam", {"learning_rate": 0.01, "wd": 0.01}, ref_adam, 2),
    ("adam", {"learning_rate": 0.02, "beta1": 0.7, "beta2": 0.9, "clip_gradient": 0.3, "rescale_grad": 0.5},
     ref_adam, 2),
    ("adagrad", {"learning_rate": 0.1, "wd": 0.01, "eps": 1e-6, "clip_gradient": 1.0}, ref_adagrad, 1),
    ("rmsprop", {"learning_rate": 0.01, "gamma1": 0.8, "wd": 0.01}, ref_rmsprop, 1),
    ("rmsprop", {"learning_rate": 0.01, "centered": True, "gamma1": 0.85, "gamma2": 0.7, "clip_weights": 0.9},
     ref_rmsprop, 3),
    ("adadelta", {"rho": 0.8, "epsilon": 1e-4, "wd": 0.01, "rescale_grad": 2.0}, ref_adadelta, 2),
    ("signum", {"learning_rate": 0.01, "momentum": 0.8, "wd": 0.01, "wd_lh": 0.05, "clip_gradient": 0.5},
     ref_signum, 1),
    ("signum", {"learning_rate": 0.01, "momentum": 0.0, "wd": 0.1}, ref_signum, 1),
    ("ftrl", {"learning_rate": 0.1, "lamda1": 0.05, "wd": 0.01, "clip_gradient": 1.5}, ref_ftrl, 2),
]

_RENAMED = {"clip_gradient": "clip", "rescale_grad": "rescale", "learning_rate": "lr"}


def _reference_kwargs(name, kwargs):
    defaults = {"sgd": {"learning_rate": 0.01}, "nag": {"learning_rate": 0.01}, "adam": {"learning_rate": 0.001},
                "rmsprop": {"learning_rate": 0.001}, "adagrad": {"learning_rate": 0.01},
                "adadelta": {"learning_rate": 0.0}, "signum": {"learning_rate": 0.01, "momentum": 0.9},
                "ftrl": {"learning_rate": 0.1}}[name]
    merged = {"wd": 0.0, **defaults, **kwargs}
    return {_RENAMED.get(k, k): v for k, v in merged.items()}


@pytest.mark.parametrize(("name", "kwargs", "reference", "state_count"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_update_matches_numpy_over_steps(name, kwargs, reference, state_count):
    rng = np.random.default_rng(5)
    optimizer = mx.optimizer.create(name, **kwargs)
    updater = mx.optimizer.get_updater(optimizer)
    start = rng.uniform(-1, 1, size=(4, 5)).astype(np.float32)
    weight = mx.nd.array(start)
    expected = start.astype(np.float64)
    state = _zeros(start.shape, state_count)
    ref_kwargs = _reference_kwargs(name, kwargs)
    for t in range(1, 6):
        grad = rng.normal(0, 1.5, size=start.shape).astype(np.float32)
        updater(3, mx.nd.array(grad), weight)
        expected, state = reference(expected, grad.astype(np.float64), state, t=t, **ref_kwargs)
        np.testing.assert_allclose(weight.asnumpy(), expected, rtol=2e-5, atol=2e-6,
                                   err_msg=f"{name} step {t}")
    assert optimizer.num_update == 5


def test_sgld_adds_gaussian_noise_of_variance_lr():
    mx.random.seed(3)
    optimizer = mx.optimizer.SGLD(learning_rate=0.04, wd=0.5)
    weight = mx.nd.ones((200, 200))
    optimizer.update(0, weight, mx.nd.ones((200, 200)), None)
    change = weight.asnumpy().astype(np.float64) - 1.0
    # drift -lr/2 * (g + wd*w) = -0.02 * 1.5, noise N(0, sqrt(lr))
    assert change.mean() == pytest.approx(-0.03, abs=0.003)
    assert change.std() == pytest.approx(0.2, rel=0.02)


def test_dcasgd_with_momentum_by_hand():
    optimizer = mx.optimizer.DCASGD(learning_rate=0.1, momentum=0.5, lamda=0.2)
    weight = mx.nd.array([1.0, -1.0])
    state = optimizer.create_state(0, weight)
    expected, previous, mom = np.array([1.0, -1.0]), np.array([1.0, -1.0]), np.zeros(2)
    for grad in ([0.5, 1.0], [2.0, -1.0], [-1.0, 0.5]):
        g = np.array(grad)
        mom = 0.5 * mom - 0.1 * (g + 0.2 * g * g * (expected - previous))
        previous, expected = expected, expected + mom
        optimizer.update(0, weight, mx.nd.array(grad), state)
    np.testing.assert_allclose(weight.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(state[1].asnumpy(), previous, rtol=1e-6)


def test_lars_decays_only_weights_and_scales_only_layers():
    names = {0: "fc_weight", 1: "bn_gamma", 2: "fc_bias"}
    optimizer = mx.optimizer.LARS(learning_rate=0.1, wd=0.1, eta=0.5, param_idx2name=names)
    assert optimizer._get_wds([0, 1, 2]) == [0.1, 0.0, 0.0]
    weight, gamma = mx.nd.array([3.0, 4.0]), mx.nd.array([3.0, 4.0])
    grad = mx.nd.array([0.6, 0.8])
    optimizer.update([0, 1], [weight, gamma], [grad, grad], [None, None])
    # weight: lr * eta * ||w|| / (||g|| + wd * ||w||) = 0.1 * 0.5 * 5 / (1 + 0.5); then SGD with wd
    lars_lr = 0.1 * 0.5 * 5 / 1.5
    expected = (1 - lars_lr * 0.1) * np.array([3, 4]) - lars_lr * np.array([0.6, 0.8])
    np.testing.assert_allclose(weight.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(gamma.asnumpy(), np.array([3, 4]) - 0.1 * np.array([0.6, 0.8]), rtol=1e-6)


def test_test_optimizer():
    optimizer = mx.optimizer.create("test", rescale_grad=2.0)
    weight = mx.nd.array([1.0])
    state = optimizer.create_state(0, weight)
    optimizer.update(0, weight, mx.nd.array([0.25]), state)
    assert weight.asnumpy()[0] == 1.5 and state.asnumpy()[0] == 1.5


@settings(max_examples=30, deadline=None)
@given(lr=st.floats(1e-3, 1.0), momentum=st.sampled_from([0.0, 0.5, 0.9]), wd=st.floats(0.0, 0.1),
       rescale=st.floats(0.1, 2.0), clip=st.one_of(st.none(), st.floats(0.05, 3.0)), seed=st.integers(0, 2 ** 16))
def test_sgd_matches_numpy_for_any_hyperparameters(lr, momentum, wd, rescale, clip, seed):
    rng = np.random.default_rng(seed)
    optimizer = mx.optimizer.SGD(learning_rate=lr, momentum=momentum, wd=wd, rescale_grad=rescale,
                                 clip_gradient=clip)
    start = rng.normal(size=(3, 5)).astype(np.float32)
    weight = mx.nd.array(start)
    state = optimizer.create_state(0, weight)
    expected, mom = start.astype(np.float64), np.zeros(start.shape)
    for _ in range(3):
        grad = rng.normal(0, 2, size=start.shape).astype(np.float32)
        optimizer.update(0, weight, mx.nd.array(grad), state)
        expected, mom = ref_sgd(expected, grad.astype(np.float64), mom, lr, wd, rescale, clip, momentum)
    np.testing.assert_allclose(weight.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_sgd_momentum_state_is_the_momentum():
    optimizer = mx.optimizer.SGD(learning_rate=0.5, momentum=0.9)
    weight = mx.nd.array([1.0, -2.0])
    state = optimizer.create_state(0, weight)
    optimizer.update(0, weight, mx.nd.array([1.0, 1.0]), state)
    np.testing.assert_allclose(state.asnumpy(), [-0.5, -0.5])
    optimizer.update(0, weight, mx.nd.array([0.0, 2.0]), state)
    # mom = 0.9 * -0.5 - 0.5 * g
    np.testing.assert_allclose(state.asnumpy(), [-0.45, -1.45], rtol=1e-6)
    np.testing.assert_allclose(weight.asnumpy(), [1.0 - 0.5 - 0.45, -2.0 - 0.5 - 1.45], rtol=1e-6)
    assert mx.optimizer.SGD().create_state(0, weight) is None


# ---- MXNet 1.9.1's own updates ----------------------------------------------------------------------


def _reference():
    return json.loads((FIXTURES / "mxnet_reference.json").read_text())


MXNET_CASES = _reference()["optimizers"]


@pytest.mark.parametrize("case", MXNET_CASES, ids=[c["case"] for c in MXNET_CASES])
def test_update_matches_mxnet(case):
    arrays = np.load(FIXTURES / "mxnet_optimizers.npz", allow_pickle=False)
    optimizer = mx.optimizer.create(case["name"], **case["kwargs"])
    updater = mx.optimizer.get_updater(optimizer)
    for index in (0, 1):
        prefix = f"{case['case']}/{index}"
        weight = mx.nd.array(arrays[f"{prefix}/weight0"])
        for step in range(case["steps"]):
            updater(index, mx.nd.array(arrays[f"{prefix}/grad{step}"]), weight)
            np.testing.assert_allclose(weight.asnumpy(), arrays[f"{prefix}/weight{step + 1}"], rtol=1e-5,
                                       atol=1e-6, err_msg=f"{prefix} step {step + 1}")


# ---- learning rates, weight decay multipliers, update counts -----------------------------------------


def test_weight_decay_only_on_weights_and_gammas_when_names_are_known():
    names = {0: "fc1_weight", 1: "fc1_bias", 2: "bn_gamma", 3: "bn_beta", 4: "bn_moving_mean"}
    optimizer = mx.optimizer.SGD(wd=0.1, param_idx2name=names)
    assert optimizer._get_wds([0, 1, 2, 3, 4]) == [0.1, 0.0, 0.1, 0.0, 0.0]
    # without names every index is decayed
    assert mx.optimizer.SGD(wd=0.1)._get_wd(1) == 0.1


def test_bias_is_not_decayed_in_an_update():
    optimizer = mx.optimizer.SGD(learning_rate=0.1, wd=0.5, param_idx2name={0: "fc_weight", 1: "fc_bias"})
    weight, bias = mx.nd.array([2.0]), mx.nd.array([2.0])
    zero = mx.nd.array([0.0])
    optimizer.update(0, weight, zero, None)
    optimizer.update(1, bias, zero, None)
    np.testing.assert_allclose(weight.asnumpy(), [2.0 * (1 - 0.1 * 0.5)])
    np.testing.assert_allclose(bias.asnumpy(), [2.0])


def test_multipliers_from_symbol_attributes_and_explicit_dicts():
    data = mx.sym.Variable("data")
    weight = mx.sym.Variable("fc_weight", lr_mult=2.0, wd_mult=0.5)
    net = mx.sym.FullyConnected(data, weight=weight, num_hidden=3, name="fc")
    optimizer = mx.optimizer.SGD(learning_rate=0.1, wd=0.2, sym=net,
                                 param_idx2name={0: "fc_weight", 1: "fc_bias"})
    assert optimizer._get_lr(0) == pytest.approx(0.2)
    assert optimizer._get_wd(0) == pytest.approx(0.1)
    assert optimizer._get_lr(1) == pytest.approx(0.1)
    optimizer.set_lr_mult({"fc_bias": 3.0, 0: 5.0})
    assert optimizer._get_lr(1) == pytest.approx(0.3)
    assert optimizer._get_lr(0) == pytest.approx(0.5)  # an index beats a name
    optimizer.set_wd_mult({"fc_bias": 1.0})
    assert optimizer._get_wd(1) == pytest.approx(0.2)


def test_param_dict_multipliers_take_precedence():
    class Param:
        lr_mult, wd_mult = 0.5, 4.0

    optimizer = mx.optimizer.SGD(learning_rate=0.2, wd=0.01, param_dict={7: Param()}, lr_mult={7: 9.0})
    assert optimizer._get_lr(7) == pytest.approx(0.1)
    assert optimizer._get_wd(7) == pytest.approx(0.04)


def test_num_update_is_the_largest_count_per_device():
    optimizer = mx.optimizer.SGD(begin_num_update=10)
    weight, grad = mx.nd.zeros((2,)), mx.nd.zeros((2,))
    for index in (0, 0, 1):
        optimizer.update(index, weight, grad, None)
    assert optimizer.num_update == 12
    assert optimizer._index_update_count == {0: 12, 1: 11}
    optimizer._set_current_context(1)  # another device counts its own updates
    optimizer.update(0, weight, grad, None)
    assert optimizer._index_update_count == {0: 11}
    assert optimizer.num_update == 12


def test_scheduler_drives_the_learning_rate():
    scheduler = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    optimizer = mx.optimizer.SGD(lr_scheduler=scheduler)
    weight = mx.nd.array([0.0])
    seen = []
    for _ in range(5):
        optimizer.update(0, weight, mx.nd.array([1.0]), None)
        seen.append(optimizer.learning_rate)
    assert seen == [1.0, 1.0, 0.5, 0.5, 0.25]
    np.testing.assert_allclose(weight.asnumpy(), [-(1.0 + 1.0 + 0.5 + 0.5 + 0.25)])


def test_learning_rate_overrides_the_schedulers_base_lr_with_a_warning():
    scheduler = mx.lr_scheduler.FactorScheduler(step=5, base_lr=0.3)
    with pytest.warns(UserWarning, match="overwritten"):
        optimizer = mx.optimizer.SGD(learning_rate=0.1, lr_scheduler=scheduler)
    assert scheduler.base_lr == 0.1
    with pytest.raises(TrainingValueError, match="lr_scheduler"):
        optimizer.set_learning_rate(0.5)
    with pytest.raises(UserWarning, match="lr_scheduler"):  # what MXNet raises, for code that catches it
        optimizer.set_learning_rate(0.5)
    plain = mx.optimizer.SGD()
    assert plain.learning_rate == 0.01
    plain.set_learning_rate(0.5)
    assert plain.learning_rate == 0.5


def test_aggregated_sgd_update_takes_lists():
    optimizer = mx.optimizer.SGD(learning_rate=0.1, momentum=0.5)
    weights = [mx.nd.array([1.0]), mx.nd.array([2.0, 3.0])]
    grads = [mx.nd.array([1.0]), mx.nd.array([1.0, -1.0])]
    states = [optimizer.create_state(i, w) for i, w in enumerate(weights)]
    optimizer.update([0, 1], weights, grads, states)
    np.testing.assert_allclose(weights[0].asnumpy(), [0.9])
    np.testing.assert_allclose(weights[1].asnumpy(), [1.9, 3.1])
    assert optimizer._index_update_count == {0: 1, 1: 1}


@pytest.mark.parametrize(("name", "kwargs"), [("sgd", {"momentum": 0.9, "wd": 0.01}), ("adam", {"wd": 0.01}),
                                            ("rmsprop", {"centered": True}), ("ftrl", {}), ("signum", {})])
def test_updater_with_lists_aggregates_and_matches_one_by_one(name, kwargs):
    rng = np.random.default_rng(2)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    contexts = [mx.cpu(0), mx.cpu(0), mx.cpu(1)]  # one list may hold several devices
    starts = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(3)]
    names = {0: "a_weight", 1: "a_bias", 2: "b_weight"}
    together = mx.optimizer.get_updater(mx.optimizer.create(name, param_idx2name=names, **kwargs))
    alone = mx.optimizer.get_updater(mx.optimizer.create(name, param_idx2name=names, **kwargs))
    assert together.optimizer.aggregate_num > 1
    w_together = [mx.nd.array(w, ctx=c) for w, c in zip(starts, contexts)]
    w_alone = [mx.nd.array(w, ctx=c) for w, c in zip(starts, contexts)]
    for step in grads:
        together([0, 1, 2], [mx.nd.array(g, ctx=c) for g, c in zip(step, contexts)], w_together)
        for i, (g, c) in enumerate(zip(step, contexts)):
            alone(i, mx.nd.array(g, ctx=c), w_alone[i])
    for a, b in zip(w_together, w_alone):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6, atol=1e-7)
    # counts are kept per device of the list's first weight, as MXNet's Updater does
    assert together.optimizer._all_index_update_counts == {0: {0: 3, 1: 3, 2: 3}}
    assert alone.optimizer._all_index_update_counts == {0: {0: 3, 1: 3}, 1: {2: 3}}


def test_a_small_aggregated_update_runs_on_the_calling_thread():
    # an MLP's update (~1 MB) is pushed as a small kernel: with nothing pending it runs at the
    # push, so the next forward pass is granted at once instead of queued behind a worker
    import mxkit.engine

    if not getattr(type(mxkit.engine.get()), "inline_small_ops", False):
        pytest.skip("the configured engine runs every op at its push or has no inline path")
    optimizer = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9)
    updater = mx.optimizer.get_updater(optimizer)
    weights = [mx.nd.ones((64, 32)), mx.nd.ones((32,))]
    grads = [mx.nd.ones((64, 32)), mx.nd.ones((32,))]
    updater([0, 1], grads, weights)  # (the first call also makes the states)
    mx.nd.waitall()
    updater([0, 1], grads, weights)
    assert mxkit.engine.get().pending == 0
    np.testing.assert_allclose(weights[1].asnumpy(), 1 - 0.1 - (0.9 * 0.1 + 0.1), rtol=1e-6)


def test_aggregated_update_errors():
    optimizer = mx.optimizer.SGD(momentum=0.9)
    weights = [mx.nd.zeros((2,)), mx.nd.zeros((3,))]
    states = [optimizer.create_state(i, w) for i, w in enumerate(weights)]
    with pytest.raises(TrainingValueError, match="as many weights, gradients and states as indices"):
        optimizer.update([0, 1], weights, [mx.nd.zeros((2,))], states)
    with pytest.raises(ShapeError, match="sgd_mom_update: input 1 has shape"):
        optimizer.update([0, 1], weights, [mx.nd.zeros((2,)), mx.nd.zeros((4,))], states)
    with pytest.raises(MXKitError, match="the weight is on cpu\\(0\\) but an input is on cpu\\(1\\)"):
        optimizer.update([0, 1], weights, [mx.nd.zeros((2,)), mx.nd.zeros((3,), ctx=mx.cpu(1))], states)


def test_custom_optimizer_without_aggregation_gets_one_call_per_weight():
    calls = []

    class Recorder(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            calls.append(index)

    updater = mx.optimizer.get_updater(Recorder())
    updater([3, 5], [mx.nd.zeros((1,))] * 2, [mx.nd.zeros((1,))] * 2)
    assert calls == [3, 5]


def test_multi_precision_updates_a_float32_master_copy():
    optimizer = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True)
    weight = mx.nd.array([1.0, 2.0], dtype="float16")
    state = optimizer.create_state_multi_precision(0, weight)
    momentum, master = state
    assert master.dtype == np.float32 and momentum.dtype == np.float32
    for _ in range(3):
        optimizer.update_multi_precision(0, weight, mx.nd.array([1e-3, 1e-3], dtype="float16"), state)
    expected = np.array([1.0, 2.0]) - 0.1 * 1e-3 * (1 + 1.9 + 2.71)
    np.testing.assert_allclose(master.asnumpy(), expected, rtol=1e-5)
    assert weight.dtype == np.float16
    np.testing.assert_allclose(weight.asnumpy(), expected.astype(np.float16))
    adam = mx.optimizer.Adam(multi_precision=True)
    adam_state = adam.create_state_multi_precision(0, weight)
    assert adam_state[0].dtype == np.float32
    adam.update_multi_precision(0, weight, mx.nd.array([1.0, -1.0], dtype="float16"), adam_state)
    np.testing.assert_allclose(weight.asnumpy(), [1.0 - 0.001, 2.0 + 0.001], rtol=1e-3)


def test_weights_on_another_device_are_updated_there():
    ctx = mx.cpu(1)
    optimizer = mx.optimizer.create("adam", learning_rate=0.1)
    updater = mx.optimizer.get_updater(optimizer)
    weight = mx.nd.array([1.0, 2.0], ctx=ctx)
    updater(0, mx.nd.array([1.0, 1.0], ctx=ctx), weight)
    assert all(state.context == ctx for state in updater.states[0]) and weight.context == ctx
    np.testing.assert_allclose(weight.asnumpy(), [0.9, 1.9], rtol=1e-5)


def test_fused_update_operators_are_in_mx_nd():
    weight, grad, mom = mx.nd.array([1.0]), mx.nd.array([2.0]), mx.nd.array([0.5])
    mx.nd.sgd_mom_update(weight, grad, mom, lr=0.1, momentum=0.5, out=weight)
    np.testing.assert_allclose(mom.asnumpy(), [0.25 - 0.2])
    np.testing.assert_allclose(weight.asnumpy(), [1.05])
    fresh = mx.nd.sgd_update(weight, grad, lr=0.5, clip_gradient=1.0)
    np.testing.assert_allclose(fresh.asnumpy(), [0.55])
    np.testing.assert_allclose(weight.asnumpy(), [1.05])  # not written without out=


# ---- descriptions and states -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sgd", "nag", "adam", "adagrad", "rmsprop", "adadelta", "signum", "ftrl", "adamax",
                                  "nadam", "ftml", "dcasgd", "lamb", "lars", "sgld",
                                  "test"])
def test_description_round_trips_through_json(name):
    kwargs = {"wd": 0.01, "rescale_grad": 0.125, "clip_gradient": 2.0, "param_idx2name": {0: "a_weight", 1: "b"},
              "lr_mult": {"a_weight": 2.0}}
    original = mx.optimizer.create(name, **kwargs)
    description = json.loads(original.dumps())
    assert description["name"] == name
    rebuilt = mx.optimizer.create(**description)
    assert type(rebuilt) is type(original)
    assert rebuilt.describe() == original.describe()
    assert rebuilt.idx2name == {0: "a_weight", 1: "b"}
    assert rebuilt._get_wd(1) == 0.0 and rebuilt._get_lr(0) == pytest.approx(2 * original._get_lr(1))
    assert mx.optimizer.loads(original.dumps()).describe() == original.describe()


def test_description_of_numpy_scalars_is_plain_json():
    optimizer = mx.optimizer.SGD(learning_rate=np.float32(0.5), wd=np.float64(0.25), momentum=np.float32(0.5),
                                 lr_mult={np.int64(3): np.float32(2.0)})
    description = json.loads(optimizer.dumps())
    assert description["learning_rate"] == 0.5 and description["wd"] == 0.25 and description["momentum"] == 0.5
    assert description["lr_mult"] == [[3, 2.0]]


def test_description_carries_the_scheduler():
    optimizer = mx.optimizer.SGD(momentum=0.9, lr_scheduler=mx.lr_scheduler.MultiFactorScheduler(
        step=[3, 6], factor=0.1, base_lr=0.2, warmup_steps=2))
    rebuilt = mx.optimizer.create(**json.loads(optimizer.dumps()))
    assert isinstance(rebuilt.lr_scheduler, mx.lr_scheduler.MultiFactorScheduler)
    assert [rebuilt.lr_scheduler(n) for n in range(8)] == \
        [mx.lr_scheduler.MultiFactorScheduler(step=[3, 6], factor=0.1, base_lr=0.2, warmup_steps=2)(n)
         for n in range(8)]


def test_updater_states_round_trip_without_pickle():
    optimizer = mx.optimizer.create("rmsprop", centered=True, learning_rate=0.01)
    updater = mx.optimizer.get_updater(optimizer)
    weights = {0: mx.nd.array([1.0, 2.0]), "fc_bias": mx.nd.array([[0.5]])}
    for key, weight in weights.items():
        updater(key, mx.nd.ones(weight.shape), weight)
    blob = updater.get_states(dump_optimizer=True)
    assert blob[:2] == b"PK"  # an npz archive
    other = mx.optimizer.get_updater(mx.optimizer.SGD())
    other.set_states(blob)
    assert isinstance(other.optimizer, mx.optimizer.RMSProp) and other.optimizer.centered
    assert other.optimizer.num_update == 1
    assert set(other.states) == {0, "fc_bias"}
    for key in other.states:
        for mine, theirs in zip(updater.states[key], other.states[key]):
            np.testing.assert_array_equal(mine.asnumpy(), theirs.asnumpy())
    # both continue identically
    for up in (updater, other):
        for key, weight in weights.items():
            up(key, mx.nd.ones(weight.shape) * 0.5, weight.copy())
    for key in weights:
        for mine, theirs in zip(updater.states[key], other.states[key]):
            np.testing.assert_allclose(mine.asnumpy(), theirs.asnumpy())
    only_states = mx.optimizer.get_updater(mx.optimizer.SGD())
    only_states.set_states(updater.get_states())
    assert isinstance(only_states.optimizer, mx.optimizer.SGD)


def test_nadam_schedule_survives_a_states_round_trip():
    first = mx.optimizer.get_updater(mx.optimizer.Nadam(learning_rate=0.01))
    weight = mx.nd.array([1.0, 2.0])
    for _ in range(3):
        first(0, mx.nd.array([0.5, -0.5]), weight)
    second = mx.optimizer.get_updater(mx.optimizer.SGD())
    second.set_states(first.get_states(dump_optimizer=True))
    assert second.optimizer.m_schedule == first.optimizer.m_schedule != 1.0
    resumed = weight.copy()
    first(0, mx.nd.array([0.5, -0.5]), weight)
    second(0, mx.nd.array([0.5, -0.5]), resumed)
    np.testing.assert_array_equal(weight.asnumpy(), resumed.asnumpy())


def test_states_with_none_and_moved_to_the_weights_device():
    updater = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.0))
    updater(0, mx.nd.ones((2,)), mx.nd.zeros((2,)))
    restored = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.0))
    restored.set_states(updater.get_states())
    assert restored.states == {0: None}
    momentum = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    momentum(0, mx.nd.ones((2,)), mx.nd.zeros((2,)))
    moved = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    moved.set_states(momentum.get_states())
    weight = mx.nd.zeros((2,), ctx=mx.cpu(2))
    moved(0, mx.nd.ones((2,), ctx=mx.cpu(2)), weight)
    assert moved.states[0].context == mx.cpu(2)


def test_pickled_or_corrupt_states_are_refused():
    updater = mx.optimizer.get_updater(mx.optimizer.SGD())
    with pytest.raises(FormatError, match="pickle"):
        updater.set_states(pickle.dumps({0: None}))
    with pytest.raises(FormatError, match="not an mxkit optimizer states archive"):
        updater.set_states(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(FormatError, match="bytes"):
        updater.set_states("a string")


# ---- registry and bad inputs -------------------------------------------------------------------------


def test_unknown_optimizer_lists_the_choices():
    with pytest.raises(UnknownNameError, match=r"unknown optimizer 'sgdd'.*did you mean sgd.*choices: .*adam"):
        mx.optimizer.create("sgdd")
    assert isinstance(mx.optimizer.create("SGD"), mx.optimizer.SGD)
    assert isinstance(mx.optimizer.Optimizer.create_optimizer("ccsgd"), mx.optimizer.SGD)


def test_register_a_custom_optimizer():
    @mx.optimizer.register
    class HalfStep(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            weight[:] = weight - 0.5 * grad

    try:
        built = mx.optimizer.create("halfstep")
        assert isinstance(built, HalfStep)
        assert json.loads(built.dumps())["name"] == "halfstep"
        weight = mx.nd.array([1.0])
        mx.optimizer.get_updater(built)(0, mx.nd.array([1.0]), weight)
        np.testing.assert_allclose(weight.asnumpy(), [0.5])
        with pytest.warns(UserWarning, match="overriding"):
            mx.optimizer.register(type("HalfStep", (mx.optimizer.Optimizer,), {}))
    finally:
        del mx.optimizer.Optimizer.opt_registry["halfstep"]
    with pytest.raises(TrainingValueError, match="subclasses of Optimizer"):
        mx.optimizer.register(int)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"momentum": 1.5}, r"momentum=1.5 is outside \[0.0, 1.0\)"),
    ({"momentum": "fast"}, "momentum must be a number"),
    ({"clip_gradient": -1.0}, r"clip_gradient=-1.0 is outside"),
    ({"learning_rate": "0.1"}, "learning_rate must be a number"),
    ({"begin_num_update": -3}, "begin_num_update must be a non-negative int"),
    ({"param_idx2name": "fc_weight"}, "param_idx2name must be a dict"),
    ({"lr_scheduler": 0.5}, "lr_scheduler must be an LRScheduler"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(TrainingValueError, match=message):
        mx.optimizer.SGD(**kwargs)


def test_bad_hyperparameters_of_adaptive_optimizers():
    with pytest.raises(TrainingValueError, match=r"beta1=1\.0"):
        mx.optimizer.Adam(beta1=1.0)
    with pytest.raises(TrainingValueError, match=r"rho=-0\.1"):
        mx.optimizer.AdaDelta(rho=-0.1)


def test_bad_update_inputs_are_clear_errors():
    optimizer = mx.optimizer.SGD(momentum=0.9)
    weight = mx.nd.zeros((2, 3))
    with pytest.raises(TrainingValueError, match="needs NDArrays"):
        optimizer.update(0, weight, np.zeros((2, 3)), optimizer.create_state(0, weight))
    with pytest.raises(ShapeError, match=r"input 1 has shape \(3, 2\), the weight has shape \(2, 3\)"):
        optimizer.update(0, weight, mx.nd.zeros((3, 2)), optimizer.create_state(0, weight))
    with pytest.raises(TrainingValueError, match="needs an Optimizer"):
        mx.optimizer.get_updater("sgd")
    assert issubclass(TrainingValueError, MXKitError) and issubclass(UnknownNameError, ValueError)


def test_module_exports():
    for name in ("SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "AdaDelta", "Signum", "Ftrl", "Optimizer", "Updater",
                 "create", "register", "get_updater"):
        assert getattr(mx.optimizer, name) is getattr(opt, name)
