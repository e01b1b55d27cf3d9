"""The caches of imperative dispatch (typed parameters per call signature, inferred output shapes
and dtypes per operator, parameters and input shapes) never change what a call returns."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ShapeError
from mxkit.ndarray import invoke, op_functions

mx = SimpleNamespace(nd=mxkit.ndarray, MXKitError=mxkit.core.MXKitError)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), axis=st.integers(-1, 0),
       keepdims=st.sampled_from([True, False, 1, 0]), dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_repeated_calls_match_numpy_whatever_was_cached_before(shape, axis, keepdims, dtype):
    data = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    for _ in range(2):  # the second call is served from the caches
        got = mx.nd.sum(mx.nd.array(data, dtype=dtype), axis=axis, keepdims=keepdims).asnumpy()
        want = data.sum(axis=axis, keepdims=bool(keepdims))
        want = want.reshape(want.shape or (1,))  # MXNet 1.x has no 0-d arrays: a full reduction is (1,)
        assert got.shape == want.shape and got.dtype == data.dtype  # MXNet keeps the input dtype
        np.testing.assert_allclose(got, want)


def test_one_and_true_are_different_keys_of_the_parameter_cache():
    data = mx.nd.array(np.ones((2, 3)))
    # `1` and `True` hash alike: the key keeps their types, so each is parsed (and checked) itself
    assert mx.nd.sum(data, axis=1, keepdims=True).shape == (2, 1)
    with pytest.raises(mx.MXKitError, match="bad value True for parameter 'axis'"):
        mx.nd.sum(data, axis=True, keepdims=True)
    assert mx.nd.sum(data, axis=1, keepdims=1).shape == (2, 1)


def test_a_bad_call_fails_every_time_and_a_good_one_after_it_works():
    x, w = mx.nd.ones((2, 5)), mx.nd.ones((4, 3))
    for _ in range(2):
        with pytest.raises(ShapeError, match="weight has shape"):
            mx.nd.FullyConnected(x, w, num_hidden=4, no_bias=True)
    good = mx.nd.FullyConnected(x, mx.nd.ones((4, 5)), num_hidden=4, no_bias=True)
    assert good.asnumpy().tolist() == [[5.0] * 4] * 2


def test_each_call_gets_its_own_parameter_dict():
    op = mxkit.ndarray.registry.get_op("sum")
    first = op_functions._parsed_params(op, {"axis": 0})
    first["axis"] = 99
    assert op_functions._parsed_params(op, {"axis": 0})["axis"] == (0,)


def test_invoke_by_name_and_gradients_share_the_parameter_cache_with_copies():
    """Gradient functions call their backward operators by name with the same parameters every step:
    those are parsed once, and the _req an applier adds to one call's dict reaches no other call."""
    op = mxkit.ndarray.registry.get_op("_backward_FullyConnected")
    first = invoke.parsed_params(op, {"num_hidden": 4, "no_bias": True})
    first["_req"] = ("null", "write")
    again = invoke.parsed_params(op, {"num_hidden": 4, "no_bias": True})
    assert "_req" not in again and again == {k: v for k, v in first.items() if k != "_req"}
    x, w = mx.nd.ones((2, 5)), mx.nd.ones((4, 5))
    grads = [invoke.invoke_by_name("_backward_FullyConnected", mx.nd.ones((2, 4)), x, w, num_hidden=4, no_bias=True)
             for _ in range(2)]
    for data_grad, weight_grad in grads:
        assert data_grad.asnumpy().tolist() == [[4.0] * 5] * 2 and weight_grad.asnumpy().tolist() == [[2.0] * 5] * 4


def test_unhashable_parameters_and_full_caches_still_dispatch(monkeypatch):
    data = mx.nd.array(np.arange(6.0).reshape(2, 3))
    assert mx.nd.transpose(data, axes=[1, 0]).shape == (3, 2)  # a list: not cached, parsed every time
    for module, cache, limit in ((invoke, "_inferred", "_INFERRED_LIMIT"), (op_functions, "_parsed", "_PARSED_LIMIT")):
        monkeypatch.setattr(module, cache, {})
        monkeypatch.setattr(module, limit, 2)
    for n in range(1, 6):  # a new shape and a new parameter value each time
        assert mx.nd.sum(mx.nd.ones((n, 2)), axis=0, keepdims=n).asnumpy().reshape(-1).tolist() == [float(n)] * 2
    assert len(invoke._inferred) <= 2 and len(op_functions._parsed) <= 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_plain_unary_calls_take_the_fast_path_and_equal_the_general_one(dtype):
    from mxkit.ndarray.invoke import invoke_by_name
    from mxkit.ndarray.registry import get_registry

    data = mx.nd.array(np.array([[-2.5, -0.5, 0.0], [0.25, 0.75, 3.0]]), dtype=dtype)
    for name in get_registry().names():
        op_functions._info(name)  # what the first call of each operator function records
    fast = sorted(name for name in op_functions._plain_unary if not name.startswith("_") and hasattr(mx.nd, name))
    assert {"relu", "exp", "sqrt", "negative", "sign"} <= set(fast)
    for name in fast:
        got = getattr(mx.nd, name)(data).asnumpy()
        want = invoke_by_name(name, data).asnumpy()  # inference, then the same kernel
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
