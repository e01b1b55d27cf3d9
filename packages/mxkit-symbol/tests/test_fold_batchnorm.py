"""The ``fold_batchnorm`` graph pass: which Convolution -> BatchNorm pairs fold, that folded
prediction binds compute what unfolded ones do within a derived float32 bound, and that the
user's parameters are never changed and changes to them are always seen.

The bound. Both executors compute in float32 (unit roundoff u = 2**-24) with summation in any
order (GEMM blocking, oneDNN), so each dot product of length K has an absolute error at most
about K*u times the sum of the magnitudes of its terms; folding changes which products are
rounded (``x * (w*s)`` instead of ``(x*w) * s``) and adds a few roundings per layer (the
derived ``s``, ``w'``, ``b'``; the normalization's subtraction, product and sum). Relu and max
are 1-Lipschitz and a sum adds errors, so to first order the error at the output is at most
``sum over the convolutions of (K_l + 8) * u`` times the output of the same network run in
float64 on the magnitudes (|data|, |weights|, |bias|, |gamma|, |beta|, mean -> -|mean|: every
term then adds up with its sign removed). Each executor is within that of the exact result,
so they are within twice it of each other.
"""

from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import symbol as sym
from mxkit.core import config

U32 = 2.0 ** -24


def bind(net, fold=True, grad_req="null", type_dict=None, **shapes):
    with config.override(fold_batchnorm=fold):
        return net.simple_bind(None, grad_req=grad_req, type_dict=type_dict, **shapes)


def random_values(exe, seed):
    rng = np.random.default_rng(seed)
    values = {}
    for name, array in sorted(exe.arg_dict.items()):
        values[name] = rng.standard_normal(array.shape).astype(np.float32)
    for name, array in sorted(exe.aux_dict.items()):
        if name.endswith("moving_var"):
            values[name] = rng.uniform(0.2, 2.0, array.shape).astype(np.float32)
        else:
            values[name] = rng.standard_normal(array.shape).astype(np.float32)
    return values


def load(exe, values):
    for name, array in list(exe.arg_dict.items()) + list(exe.aux_dict.items()):
        array[:] = values[name]


def batchnorm_count(exe):
    return sum(1 for n in exe._graph.forward_nodes if n.op.name == "BatchNorm")


def error_bound(net, values, shapes):
    """Twice the first-order float32 error bound of the module docstring, per output element."""
    magnitudes = {name: (-np.abs(v) if name.endswith("moving_mean") else np.abs(v)).astype(np.float64)
                  for name, v in values.items()}
    exe = bind(net, fold=False, type_dict=dict.fromkeys(net.list_arguments(), "float64"), **shapes)
    load(exe, magnitudes)
    magnitude = exe.forward()[0].asnumpy()
    length = sum(prod(exe.arg_dict[n.inputs[1].node.name].shape[1:]) + 8
                 for n in exe._graph.forward_nodes if n.op.name == "Convolution")
    return 2 * length * U32 * magnitude + 1e-30


def compare(net, seed=0, **shapes):
    """Folded and unfolded prediction outputs (and the bound), from the same random parameters."""
    folded, plain = bind(net, **shapes), bind(net, fold=False, **shapes)
    values = random_values(plain, seed)
    load(folded, values)
    load(plain, values)
    got, want = folded.forward()[0].asnumpy(), plain.forward()[0].asnumpy()
    return folded, got, want, error_bound(net, values, shapes), values


def conv_bn(x, name, num_filter, fix_gamma=False, no_bias=False, **conv):
    conv.setdefault("kernel", (3, 3))
    c = sym.Convolution(x, num_filter=num_filter, no_bias=no_bias, name=f"{name}_conv", **conv)
    return sym.BatchNorm(c, fix_gamma=fix_gamma, eps=conv.pop("eps", 1e-3), name=f"{name}_bn")


@settings(max_examples=20, deadline=None)
@given(channels=st.integers(1, 4), filters=st.integers(1, 6), kernel=st.sampled_from([1, 3]),
       stride=st.integers(1, 2), pad=st.integers(0, 1), grouped=st.booleans(), no_bias=st.booleans(),
       fix_gamma=st.booleans(), eps=st.sampled_from([1e-5, 1e-3, 0.1]), side=st.integers(5, 9),
       batch=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_folded_small_nets_match_unfolded_within_the_derived_bound(channels, filters, kernel, stride, pad, grouped,
                                                                    no_bias, fix_gamma, eps, side, batch, seed):
    groups = channels if grouped and channels > 1 else 1
    filters = filters * groups
    data = sym.var("data")
    c0 = sym.Convolution(data, num_filter=filters, kernel=(kernel, kernel), stride=(stride, stride),
                         pad=(pad, pad), num_group=groups, no_bias=no_bias, name="c0")
    b0 = sym.BatchNorm(c0, fix_gamma=fix_gamma, eps=eps, name="b0")
    r0 = sym.Activation(b0, act_type="relu", name="r0")
    c1 = sym.Convolution(r0, num_filter=3, kernel=(1, 1), no_bias=not no_bias, name="c1")
    net = sym.BatchNorm(c1, fix_gamma=not fix_gamma, eps=eps, name="b1")
    shapes = {"data": (batch, channels, side, side)}
    folded, got, want, bound, _ = compare(net, seed, **shapes)
    out_side = (side + 2 * pad - kernel) // stride + 1
    out0, out1 = batch * filters * out_side ** 2, batch * 3 * out_side ** 2
    expected_folds = int(filters * channels // groups * kernel * kernel <= out0) + int(3 * filters <= out1)
    assert batchnorm_count(folded) == 2 - expected_folds
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)


def test_folding_rewrites_the_pair_and_debug_str_says_so():
    data = sym.var("data")
    net = sym.Activation(conv_bn(data, "a", 8, pad=(1, 1)), act_type="relu", name="relu")
    folded, got, want, bound, _ = compare(net, data=(2, 3, 8, 8))
    assert batchnorm_count(folded) == 0
    assert not any(n.op.name == "Convolution" and n.name == "a_conv" for n in folded._graph.forward_nodes)
    assert "Rewritten: folded: a_conv (Convolution) + a_bn (BatchNorm)" in folded.debug_str()
    assert np.all(np.abs(got - want) <= bound)
    # the folded convolution keeps the BatchNorm's name: outputs and internals keep theirs
    assert folded.output_dict.keys() == {"relu_output"}


def test_batchnorm_output_read_twice_and_as_an_output_still_folds_exactly():
    data = sym.var("data")
    bn = conv_bn(data, "a", 4, pad=(1, 1))
    net = sym.Group([sym.Activation(bn, act_type="relu") + sym.tanh(bn), bn])
    folded, plain = bind(net, data=(2, 2, 6, 6)), bind(net, fold=False, data=(2, 2, 6, 6))
    values = random_values(plain, 3)
    load(folded, values)
    load(plain, values)
    assert batchnorm_count(folded) == 0
    for got, want in zip(folded.forward(), plain.forward()):
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-4, atol=1e-4)


def test_convolution_output_read_elsewhere_is_not_folded():
    data = sym.var("data")
    conv = sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="c")
    net = sym.BatchNorm(conv, name="bn") + conv
    assert batchnorm_count(bind(net, data=(2, 2, 6, 6))) == 1
    as_output = sym.Group([sym.BatchNorm(conv, name="bn"), conv])
    assert batchnorm_count(bind(as_output, data=(2, 2, 6, 6))) == 1


def test_mean_and_variance_outputs_channels_last_and_dtype_keep_the_batchnorm():
    data = sym.var("data")
    conv = sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="c")
    with_stats = sym.BatchNorm(conv, output_mean_var=True, name="bn")
    assert batchnorm_count(bind(with_stats, data=(2, 2, 6, 6))) == 1
    other_axis = sym.BatchNorm(conv, axis=2, name="bn")
    assert batchnorm_count(bind(other_axis, data=(2, 2, 6, 6))) == 1
    half = bind(sym.BatchNorm(conv, name="bn"), type_dict={"data": "float16"}, data=(2, 2, 6, 6))
    assert batchnorm_count(half) == 1


def test_weights_larger_than_the_output_are_not_folded():
    data = sym.var("data")
    net = conv_bn(data, "a", 16, kernel=(3, 3))  # weight 16*8*9 = 1152 > output 1*16*2*2 = 64
    assert batchnorm_count(bind(net, data=(1, 8, 4, 4))) == 1
    assert batchnorm_count(bind(net, data=(8, 8, 6, 6))) == 0  # 8*16*4*4 = 2048 >= 1152


def test_training_binds_and_the_config_switch_are_not_folded():
    data = sym.var("data")
    net = conv_bn(data, "a", 4, pad=(1, 1))
    assert batchnorm_count(bind(net, grad_req="write", data=(2, 2, 6, 6))) == 1
    assert batchnorm_count(bind(net, grad_req={"a_conv_weight": "write"}, data=(2, 2, 6, 6))) == 1
    assert batchnorm_count(bind(net, fold=False, data=(2, 2, 6, 6))) == 1
    assert batchnorm_count(bind(net, data=(2, 2, 6, 6))) == 0


def test_parameters_are_never_changed_and_changes_are_seen():
    data = sym.var("data")
    net = conv_bn(data, "a", 4, pad=(1, 1))
    shapes = {"data": (2, 3, 6, 6)}
    folded, plain = bind(net, **shapes), bind(net, fold=False, **shapes)
    for seed in (1, 2):
        values = random_values(plain, seed)
        folded.copy_params_from({k: v for k, v in values.items() if k in folded.arg_dict},
                                {k: v for k, v in values.items() if k in folded.aux_dict})
        load(plain, values)
        got, want = folded.forward()[0].asnumpy(), plain.forward()[0].asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        for name, array in list(folded.arg_dict.items()) + list(folded.aux_dict.items()):
            np.testing.assert_array_equal(array.asnumpy(), values[name], err_msg=name)
    # an in-place write to one parameter is seen by the next forward
    folded.aux_dict["a_bn_moving_var"][:] = 4.0
    plain.aux_dict["a_bn_moving_var"][:] = 4.0
    np.testing.assert_allclose(folded.forward()[0].asnumpy(), plain.forward()[0].asnumpy(), rtol=1e-4, atol=1e-4)


def test_forward_in_training_mode_runs_the_unfolded_graph():
    data = sym.var("data")
    net = sym.Activation(conv_bn(data, "a", 4, pad=(1, 1)), act_type="relu")
    shapes = {"data": (4, 3, 6, 6)}
    folded, plain = bind(net, **shapes), bind(net, fold=False, **shapes)
    values = random_values(plain, 5)
    load(folded, values)
    load(plain, values)
    outputs = folded.outputs
    got = folded.forward(is_train=True)[0].asnumpy()
    want = plain.forward(is_train=True)[0].asnumpy()
    assert folded.outputs is outputs
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # batch statistics updated the moving ones, as unfolded
    np.testing.assert_allclose(folded.aux_dict["a_bn_moving_mean"].asnumpy(),
                               plain.aux_dict["a_bn_moving_mean"].asnumpy(), rtol=1e-6, atol=1e-6)
    # and prediction afterwards uses them, folded
    np.testing.assert_allclose(folded.forward()[0].asnumpy(), plain.forward()[0].asnumpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float64"])
def test_float64_folds_too(dtype):
    data = sym.var("data")
    net = conv_bn(data, "a", 4, pad=(1, 1))
    exe = bind(net, type_dict={"data": dtype}, data=(2, 2, 6, 6))
    assert batchnorm_count(exe) == 0


def test_reshaped_folded_executor_folds_and_matches():
    data = sym.var("data")
    net = sym.Activation(conv_bn(data, "a", 4, pad=(1, 1)), act_type="relu")
    folded, plain = bind(net, data=(2, 3, 6, 6)), bind(net, fold=False, data=(2, 3, 6, 6))
    values = random_values(plain, 7)
    load(folded, values)
    load(plain, values)
    folded, plain = folded.reshape(data=(1, 3, 6, 6)), plain.reshape(data=(1, 3, 6, 6))
    batch = np.random.default_rng(8).standard_normal((1, 3, 6, 6)).astype(np.float32)
    assert batchnorm_count(folded) == 0
    np.testing.assert_allclose(folded.forward(data=batch)[0].asnumpy(), plain.forward(data=batch)[0].asnumpy(),
                               rtol=1e-4, atol=1e-4)
