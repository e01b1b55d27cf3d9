"""Operator modes ported MXNet code relies on, against MXNet 1.9.1 (fixtures/compat_ops, written by
make_compat_ops_fixtures.py there): PReLU's gamma broadcasting, SoftmaxOutput with probability
labels and its multi_output normalisations, SyncBatchNorm's variance output, Reshape's deprecated
target_shape, Pooling 'same' with an all-zero pad, LayerNorm's sums over a long axis, bilinear
UpSampling; and the errors for what MXNet refuses too."""

from __future__ import annotations

import json
import os

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray import autograd

FIXTURES = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "compat_ops",
                                "compat_ops.npz"), allow_pickle=False)
CASES = sorted({key.split("/")[0] for key in FIXTURES.files})

# float32 arithmetic on O(1) inputs: every output and gradient is a short sum (at most 24 terms:
# the softmax rows, the batch statistics of 16 values), whose rounding in either library is
# ~sqrt(K) * 2**-24 * sum|term| < 1e-5 -- except layernorm_long_axis, whose gamma and beta gradients
# sum 2048 rows: both libraries accumulate them in double precision (MXNet's safe accumulation), so
# what remains is the float32 rounding of each term, 2048 * 2**-24 * |term| ~ 1e-4 * |term| at worst
# and ~sqrt(2048) * 2**-24 ~ 3e-6 relative in practice; 1e-4 keeps the worst case.
TOLERANCE = {"layernorm_long_axis": (1e-4, 1e-4)}
DEFAULT_TOLERANCE = (1e-5, 1e-5)


def _function(op):
    fn = nd
    for part in op.split("."):
        fn = getattr(fn, part)
    return fn


@pytest.mark.parametrize("case", CASES)
def test_matches_mxnet(case):
    spec = json.loads(str(FIXTURES[f"{case}/spec"]))
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["params"].items()}
    arrays = [nd.array(FIXTURES[f"{case}/in{i}"], dtype=dtype) for i, dtype in enumerate(spec["dtypes"])]
    for i in spec["differentiated"]:
        arrays[i].attach_grad()
    with autograd.record():
        outputs = _function(spec["op"])(*arrays, **params)
    outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    heads = [nd.array(FIXTURES[f"{case}/head{j}"]) for j in range(spec["heads"])]
    autograd.backward(outputs[:spec["heads"]], heads)
    rtol, atol = TOLERANCE.get(case, DEFAULT_TOLERANCE)
    assert len(outputs) == spec["outputs"]
    for j, out in enumerate(outputs):
        np.testing.assert_allclose(out.asnumpy(), FIXTURES[f"{case}/out{j}"], rtol=rtol, atol=atol,
                                   err_msg=f"{case}: output {j}")
    for i in spec["differentiated"]:
        np.testing.assert_allclose(arrays[i].grad.asnumpy(), FIXTURES[f"{case}/grad{i}"], rtol=rtol, atol=atol,
                                   err_msg=f"{case}: gradient of input {i}")


def test_prelu_gamma_that_does_not_broadcast_is_a_clear_error():
    with pytest.raises(ShapeError, match=r"cannot broadcast gamma \(5,\) to data \(3, 4\)"):
        nd.LeakyReLU(nd.ones((3, 4)), nd.ones((5,)), act_type="prelu")


def test_softmax_output_label_of_another_shape_is_a_clear_error():
    with pytest.raises(ShapeError, match=r"label shape \(3, 2\) does not match data shape \(3, 4\).*\(3,\)"):
        nd.SoftmaxOutput(nd.ones((3, 4)), nd.ones((3, 2)))


def test_take_raise_mode_refuses_negative_and_large_indices():
    data = nd.array(np.arange(6.0).reshape(3, 2))
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(MXKitError, match=r"indices must lie in \[0, 3\).*mode='raise'"):
            nd.take(data, nd.array(bad), mode="raise").asnumpy()
    np.testing.assert_array_equal(nd.take(data, nd.array([2, 0]), mode="raise").asnumpy(), [[4, 5], [0, 1]])


def test_reshape_target_shape_that_does_not_fit_is_a_clear_error():
    with pytest.raises(ShapeError, match=r"target_shape=\(5, 0\).*does not fit input shape \(2, 3, 4\)"):
        nd.Reshape(nd.ones((2, 3, 4)), target_shape=(5, 0))


def test_bilinear_upsampling_without_num_filter_is_a_clear_error():
    with pytest.raises(ShapeError, match="bilinear' needs a positive scale and num_filter"):
        nd.UpSampling(nd.ones((1, 2, 3, 3)), nd.ones((2, 1, 4, 4)), sample_type="bilinear", scale=2, num_args=2)


def test_same_pooling_refuses_a_nonzero_pad():
    with pytest.raises(ShapeError, match="computes its own padding"):
        nd.Pooling(nd.ones((1, 1, 10)), kernel=(2,), stride=(2,), pad=(1,), pooling_convention="same")


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_integer_mod_has_zero_gradients_and_float_mod_the_floor():
    # MXNet's mod_grad / mod_rgrad (src/operator/mshadow_op.h): 0 for integer types; 1 and
    # -floor(a / b) for floating ones
    a = nd.array(np.array([7, -7, 5, 3]), dtype="int32")
    b = nd.array(np.array([3, 3, 0, -2]), dtype="int32")
    for x in (a, b):
        x.attach_grad()
    with autograd.record():
        y = nd.broadcast_mod(a, b)
    y.backward(nd.ones((4,), dtype="int32"))
    assert not a.grad.asnumpy().any() and not b.grad.asnumpy().any()
    fa, fb = nd.array([7.5, -7.0, 5.0]), nd.array([2.0, 3.0, -2.0])
    for x in (fa, fb):
        x.attach_grad()
    with autograd.record():
        y = nd.broadcast_mod(fa, fb)
    y.backward(nd.ones((3,)))
    np.testing.assert_array_equal(fa.grad.asnumpy(), [1, 1, 1])
    np.testing.assert_array_equal(fb.grad.asnumpy(), -np.floor(np.array([7.5, -7.0, 5.0]) / [2.0, 3.0, -2.0]))


def test_amp_casts_change_only_floating_dtypes():
    values = np.array([1e-8, 0.1, 65504.0, 70000.0, -3.3], np.float32)
    half = nd.amp_cast(nd.array(values), dtype="float16")
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half.asnumpy(), values.astype(np.float16))  # IEEE round to nearest even
    ints = nd.amp_cast(nd.array([1, 2], dtype="int32"), dtype="float16")
    assert ints.dtype == np.int32
    outs = nd.amp_multicast(nd.ones((2,), dtype="float16"), nd.ones((2,), dtype="float32"),
                            nd.ones((2,), dtype="int32"), num_outputs=3)
    assert [o.dtype for o in outs] == [np.float32, np.float32, np.int32]
    narrow = nd.amp_multicast(nd.ones((2,), dtype="float16"), nd.ones((2,), dtype="float32"), num_outputs=2,
                              cast_narrow=True)
    assert [o.dtype for o in narrow] == [np.float16, np.float16]
    x = nd.ones((2,), dtype="float16")
    x.attach_grad()
    with autograd.record():
        y = nd.amp_cast(x, dtype="float32")
    y.backward(nd.array([0.5, 2.0]))
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad.asnumpy(), [0.5, 2.0])


def test_operator_arguments_as_mxnet_lists_them():
    from mxkit.ndarray import operator as op_api

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "compat_ops",
                           "operator_arguments.json")) as f:
        expected = json.load(f)
    for name, table in expected.items():
        got = op_api.get_operator_arguments(name)
        if name == "LeakyReLU":
            # MXNet lists gamma, the input of act_type='prelu' only; mxkit lists the default's inputs
            assert got.names == [n for n in table["names"] if n != "gamma"]
            continue
        assert got.names == table["names"] and got.narg == table["narg"], name
    for name in ("Activation", "FullyConnected", "Reshape"):
        assert op_api.get_operator_arguments(name).types == expected[name]["types"]
    assert "Activation" in op_api.get_all_registered_operators()
    with pytest.raises(MXKitError, match="unknown operator 'Activatoin'; did you mean Activation"):
        op_api.get_operator_arguments("Activatoin")


def test_cached_op_without_the_symbol_component_is_a_clear_error(monkeypatch):
    from mxkit.ndarray import cached_op

    monkeypatch.setattr(cached_op, "_implementation", None)
    with pytest.raises(MXKitError, match="needs mxkit-symbol; install it with: pip install mxkit-symbol"):
        nd.CachedOp(object())


def test_logical_functions_broadcast_and_take_numbers():
    a = np.array([[0.0, 1.0, 2.0]])
    b = np.array([[1.0], [0.0]])
    for name, reference in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                            ("logical_xor", np.logical_xor)):
        function = getattr(nd, name)
        np.testing.assert_array_equal(function(nd.array(a), nd.array(b)).asnumpy(), reference(a, b))
        np.testing.assert_array_equal(function(nd.array(a), 0).asnumpy(), reference(a, 0))
        np.testing.assert_array_equal(function(1, nd.array(a)).asnumpy(), reference(1, a))
        assert function(1, 0) == int(reference(1, 0))
    with pytest.raises(MXKitError, match="needs NDArrays or numbers"):
        nd.logical_and("a", 1)
