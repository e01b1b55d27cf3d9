"""Binds and inference as MXNet 1.9.1 does them: one unknown axis inferred back through Reshape,
NumPy-shape mode's -1 for unknown dimensions, monitor_all's names, the gradient of BatchNorm with
global statistics, bilinear UpSampling's weight shape, soft labels of SoftmaxOutput."""

import numpy as np
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.shape_mode import set_np_shape


def test_reshape_infers_an_unknown_input_axis_from_its_known_output():
    data = sym.Variable("data")
    net = sym.elemwise_add(sym.Reshape(data, shape=(0, -1)), sym.ones(shape=(2, 75)))
    for holdout in range(4):
        given = [2, 3, 5, 5]
        given[holdout] = 0
        args, outs, _ = net.infer_shape(data=tuple(given))
        assert args == [(2, 3, 5, 5)] and outs == [(2, 75)]


def test_numpy_shape_mode_reads_minus_one_as_unknown():
    previous = set_np_shape(True)
    try:
        data = sym.Variable("data", shape=(-1, 20))
        out = sym.slice(data, begin=(None, 3), end=(None, 10))
        assert out.infer_shape_partial()[1] == [(-1, 7)]
    finally:
        set_np_shape(previous)
    data = sym.Variable("data", shape=(0, 20))
    assert sym.slice(data, begin=(None, 3), end=(None, 10)).infer_shape_partial()[1] == [(0, 7)]


def test_monitor_all_names_inputs_as_mxnet():
    # MXNet 1.9.1's GraphExecutor::ExecuteMonInputCallback: a variable input under its own name,
    # then each input as <node>_<argument>; then the outputs
    data = sym.Variable("data", shape=(2, 3, 4, 4))
    conv = sym.Convolution(data, kernel=(2, 2), num_filter=1, name="conv")
    exe = conv.simple_bind(None, grad_req="null")
    names = []
    exe.set_monitor_callback(lambda name, array: names.append(name), monitor_all=True)
    exe.forward()
    assert names == ["data", "conv_data", "conv_weight", "conv_weight", "conv_bias", "conv_bias", "conv_output"]


def test_batchnorm_with_global_statistics_differentiates_in_a_bind():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3, 2, 2))
    gamma, beta = rng.uniform(0.5, 1.5, 3), rng.normal(size=3)
    mean, var = rng.normal(size=3), rng.uniform(0.5, 2.0, 3)
    net = sym.BatchNorm(sym.Variable("x"), fix_gamma=False, use_global_stats=True, eps=1e-3, name="bn")
    args = {"x": nd.array(x, dtype="float64"), "bn_gamma": nd.array(gamma, dtype="float64"),
            "bn_beta": nd.array(beta, dtype="float64")}
    grads = {n: nd.zeros(a.shape, dtype="float64") for n, a in args.items()}
    aux = [nd.array(mean, dtype="float64"), nd.array(var, dtype="float64")]
    exe = net.bind(None, args, args_grad=grads, aux_states=aux)
    exe.forward(is_train=True)
    head = rng.normal(size=x.shape)
    exe.backward(nd.array(head, dtype="float64"))
    scale = (gamma / np.sqrt(var + 1e-3)).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(grads["x"].asnumpy(), head * scale, rtol=1e-12)
    normalised = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var + 1e-3).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(grads["bn_gamma"].asnumpy(), (head * normalised).sum(axis=(0, 2, 3)), rtol=1e-12)


def test_bilinear_upsampling_weight_shape_is_inferred():
    up = sym.UpSampling(sym.Variable("data"), sym.Variable("weight"), sample_type="bilinear", scale=3,
                        num_filter=2, num_args=2)
    args, outs, _ = up.infer_shape(data=(1, 2, 5, 5))
    assert args == [(1, 2, 5, 5), (2, 1, 5, 5)] and outs == [(1, 2, 15, 15)]


def test_softmax_output_takes_probabilities_as_labels_in_a_bind():
    x, label = sym.Variable("x"), sym.Variable("label")
    net = sym.SoftmaxOutput(x, label)
    rng = np.random.default_rng(2)
    xv = rng.normal(size=(3, 4))
    probabilities = rng.uniform(size=(3, 4))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    grad = nd.zeros((3, 4), dtype="float64")
    exe = net.bind(None, {"x": nd.array(xv, dtype="float64"), "label": nd.array(probabilities, dtype="float64")},
                   args_grad={"x": grad})
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward()
    softmax = np.exp(xv) / np.exp(xv).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, softmax, rtol=1e-12)
    np.testing.assert_allclose(grad.asnumpy(), softmax - probabilities, rtol=1e-10, atol=1e-14)
