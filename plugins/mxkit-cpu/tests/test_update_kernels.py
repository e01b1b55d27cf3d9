"""The one-pass optimizer updates (mxkit_cpu.update) equal mxkit-ndarray's generic kernels to the bit,
for both float dtypes, with and without clipping, weight decay and momentum, written in place
(``out`` is the weight, as the optimizers call them) or not; they are registered like every other
kernel, and a kernel for an operator that does not exist is an error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import OpDef, OperatorRegistry, get_op

STATES = {"sgd_update": 0, "sgd_mom_update": 1, "adam_update": 2}


def _params(name, draw):
    params = dict(lr=draw(st.sampled_from([0.1, 0.01, 1e-3])), wd=draw(st.sampled_from([0.0, 1e-4, 0.5])),
                  rescale_grad=draw(st.sampled_from([1.0, 1 / 128, 3.0])),
                  clip_gradient=draw(st.sampled_from([-1.0, 0.5, 0.0])))
    if name == "sgd_mom_update":
        params["momentum"] = draw(st.sampled_from([0.0, 0.9]))
    if name == "adam_update":
        params.update(beta1=draw(st.sampled_from([0.9, 0.5])), beta2=draw(st.sampled_from([0.999, 0.9])),
                      epsilon=draw(st.sampled_from([1e-8, 1e-3])))
    return params


def _apply(name, kernel, weight, grad, states, params, in_place):
    weight, states = weight.copy(), [s.copy() for s in states]
    out = weight if in_place else np.full_like(weight, np.nan)
    op = get_op(name)
    kernel(np, [weight, grad, *states], [out], op.parse_params(params))
    return out, states


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(STATES)), dtype=st.sampled_from([np.float32, np.float64]),
       size=st.integers(0, 300), in_place=st.booleans(), specials=st.booleans(), seed=st.integers(0, 2**31 - 1),
       data=st.data())
def test_one_pass_updates_equal_the_generic_kernels_to_the_bit(name, dtype, size, in_place, specials, seed, data):
    rng = np.random.default_rng(seed)
    params = _params(name, data.draw)
    weight = rng.standard_normal(size).astype(dtype)
    grad = (rng.standard_normal(size) * 2).astype(dtype)
    if specials and size >= 3:
        grad[:3] = [np.nan, np.inf, -np.inf]
    states = [rng.standard_normal(size).astype(dtype) for _ in range(STATES[name])]
    if name == "adam_update":
        states[1] = np.abs(states[1])  # a variance
    op = get_op(name)
    assert op.kernels.get("numpy") is not None, "the CPU plugin's kernel is not registered"
    with np.errstate(invalid="ignore", over="ignore"):
        fast, fast_states = _apply(name, op.kernels["numpy"], weight, grad, states, params, in_place)
        generic, generic_states = _apply(name, op.kernel, weight, grad, states, params, in_place)
    np.testing.assert_array_equal(fast, generic)
    for got, want in zip(fast_states, generic_states, strict=True):
        np.testing.assert_array_equal(got, want)


def test_non_contiguous_and_mixed_dtypes_use_the_generic_kernel():
    weight = np.ones((4, 6), np.float32)[:, ::2]
    grad = np.ones((4, 3), np.float32)
    out = np.zeros((4, 3), np.float32)
    op = get_op("sgd_update")
    op.kernels["numpy"](np, [weight, grad], [out], op.parse_params(dict(lr=0.5)))
    np.testing.assert_array_equal(out, np.full((4, 3), 0.5, np.float32))
    mixed = np.zeros((4, 3))
    op.kernels["numpy"](np, [weight, grad.astype(np.float64)], [mixed], op.parse_params(dict(lr=0.5)))
    np.testing.assert_array_equal(mixed, np.full((4, 3), 0.5))


def test_a_kernel_for_an_unknown_operator_is_an_error():
    registry = OperatorRegistry()

    def kernel(xp, inputs, outputs, params):
        outputs[0][...] = 7

    with pytest.raises(MXKitError, match="unknown operator 'later'"):
        registry.register_kernel("later", backend="numpy", kernel=kernel)
    op = registry.register(OpDef(name="later", kernel=lambda *a: None, infer_shape=lambda p, s: [s[0]]))
    registry.register_kernel("later", backend="numpy", kernel=kernel)
    assert op.kernels["numpy"] is kernel
    registry.clear_kernels()
    assert op.kernels == {}


def test_the_update_operators_exist_without_mxkit_train():
    import subprocess
    import sys

    code = ("import sys; import mxkit.ndarray as nd; import numpy as np; "
            "w = nd.ones((3,)); nd.sgd_update(w, nd.ones((3,)), lr=0.5, out=w); "
            "assert w.asnumpy().tolist() == [0.5] * 3, w.asnumpy(); "
            "assert 'mxkit.train.optimizer' not in sys.modules, 'the optimizers were imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
