"""Caffe models converted, written, loaded back and run, against a numpy reference of Caffe's forward pass."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
sys.path.insert(0, HERE)  # caffe_numpy_reference (importlib import mode)

import mxkit.ndarray as nd  # noqa: E402
import mxkit.symbol as sym  # noqa: E402
from caffe_numpy_reference import CaffeReference  # noqa: E402
from mxkit.caffe import caffe_pb2, convert_mean, convert_model, convert_symbol  # noqa: E402

LAYER_CASES = sorted(name[:-len(".prototxt")] for name in os.listdir(os.path.join(FIXTURES, "layers"))
                     if name.endswith(".prototxt"))


def _caffe_weights(caffemodel_path):
    """The caffemodel's blobs read with protobuf alone (independent of the converter's reader)."""
    net = caffe_pb2.NetParameter()
    with open(caffemodel_path, "rb") as stream:
        net.ParseFromString(stream.read())
    layers = [(layer.name, layer.blobs) for layer in net.layer] or [(layer.name, layer.blobs) for layer in net.layers]
    weights = {}
    for name, blobs in layers:
        arrays = []
        for blob in blobs:
            shape = tuple(blob.shape.dim) if blob.HasField("shape") else (blob.num, blob.channels, blob.height,
                                                                          blob.width)
            arrays.append(np.array(blob.data, dtype=np.float32).reshape(shape))
        weights[name] = arrays
    return weights


def _parsed(prototxt_path):
    from mxkit.caffe.reader import read_prototxt

    return read_prototxt(prototxt_path)


def _output_blobs(net):
    """The tops no later layer reads, in the order they are last written (the converted outputs' order)."""
    order = []
    read_after = set()
    for layer in net.layer:
        if any(rule.phase == caffe_pb2.TRAIN for rule in layer.include):
            continue
        read_after.update(layer.bottom)
        for top in layer.top:
            if top in order:
                order.remove(top)
            order.append(top)
            read_after.discard(top)
    return [t for t in order if t not in read_after and not any(
        layer.type == "Input" and t in layer.top for layer in net.layer)]


def _run_checkpoint(prefix, inputs):
    """Load PREFIX-symbol.json and PREFIX-0000.params as MXNet would, bind, and run forward (inference)."""
    symbol = sym.load(f"{prefix}-symbol.json")
    saved = nd.load(f"{prefix}-0000.params")
    saved = saved if isinstance(saved, dict) else {}  # a file of no arrays loads as an empty list, as in MXNet
    args = {k[4:]: v for k, v in saved.items() if k.startswith("arg:")}
    auxs = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    args.update({name: nd.array(value) for name, value in inputs.items()})
    executor = symbol.bind(None, args, grad_req="null", aux_states=auxs)
    return [out.asnumpy() for out in executor.forward(is_train=False)]


def _assert_close(actual, expected, what):
    # float32 sums of at most ~100 products against a float64 reference: relative error ~1e-6;
    # 1e-4 of the output's scale leaves room for the transcendental functions (exp, pow)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, Caffe gives {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale, err_msg=what)


def _inputs_for(net, shapes, seed):
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


@pytest.mark.parametrize("case", LAYER_CASES)
def test_every_supported_layer_round_trips(case, tmp_path):
    prototxt = os.path.join(FIXTURES, "layers", f"{case}.prototxt")
    caffemodel = os.path.join(FIXTURES, "layers", f"{case}.caffemodel")
    prefix = str(tmp_path / case)
    _symbol, _arg_params, _aux_params, input_dim = convert_model(prototxt, caffemodel, prefix, bgr_to_rgb=False)
    assert os.path.exists(f"{prefix}-symbol.json") and os.path.exists(f"{prefix}-0000.params")
    net = _parsed(prototxt)
    shapes = {top: tuple(s.dim) for layer in net.layer if layer.type == "Input"
              for top, s in zip(layer.top, layer.input_param.shape)}
    assert input_dim == next(iter(shapes.values()))
    inputs = _inputs_for(net, shapes, seed=7)
    expected = CaffeReference(net, _caffe_weights(caffemodel)).forward(inputs)
    outputs = _run_checkpoint(prefix, inputs)
    names = _output_blobs(net)
    assert len(outputs) == len(names)
    for name, actual in zip(names, outputs):
        _assert_close(actual, expected[name], f"{case}: blob {name!r}")


def test_smallnet_converts_bgr_to_rgb_and_folds_batchnorm(tmp_path):
    prototxt = os.path.join(FIXTURES, "smallnet.prototxt")
    caffemodel = os.path.join(FIXTURES, "smallnet.caffemodel")
    prefix = str(tmp_path / "smallnet")
    symbol, arg_params, aux_params, input_dim = convert_model(prototxt, caffemodel, prefix)
    assert input_dim == (2, 3, 11, 11)
    # names as MXNet's converter gives them ('/' and '-' become '_'); Scale folded into BatchNorm
    assert "conv1_7x7_s2_weight" in arg_params and "bn1_gamma" in arg_params and "bn1_moving_var" in aux_params
    assert not any(name.startswith("scale1") for name in symbol.list_arguments())
    assert "accuracy" not in symbol.tojson()  # the TRAIN-only layer is left out
    net = _parsed(prototxt)
    bgr = _inputs_for(net, {"data": input_dim}, seed=3)["data"]
    expected = CaffeReference(net, _caffe_weights(caffemodel)).forward({"data": bgr})["prob"]
    rgb = bgr[:, ::-1].copy()
    (actual,) = _run_checkpoint(prefix, {"data": rgb})
    _assert_close(actual, expected, "smallnet with RGB input")
    # the same model kept in BGR takes Caffe's input as it is
    convert_model(prototxt, caffemodel, prefix + "-bgr", bgr_to_rgb=False)
    (actual_bgr,) = _run_checkpoint(prefix + "-bgr", {"data": bgr})
    _assert_close(actual_bgr, expected, "smallnet with BGR input")


def test_v1_prototxt_and_caffemodel_are_upgraded(tmp_path):
    prototxt = os.path.join(FIXTURES, "smallnet_v1.prototxt")
    caffemodel = os.path.join(FIXTURES, "smallnet_v1.caffemodel")
    prefix = str(tmp_path / "v1")
    _, arg_params, _, input_dim = convert_model(prototxt, caffemodel, prefix, bgr_to_rgb=False)
    assert input_dim == (2, 3, 6, 6)
    assert arg_params["conv1_weight"].shape == (4, 3, 3, 3) and arg_params["fc2_weight"].shape == (3, 16)
    net = _parsed(prototxt)  # upgraded to `layer` on reading
    assert [layer.type for layer in net.layer] == ["Convolution", "ReLU", "Pooling", "InnerProduct", "Softmax"]
    inputs = _inputs_for(net, {"data": input_dim}, seed=5)
    expected = CaffeReference(net, _caffe_weights(caffemodel)).forward(inputs)["prob"]
    (actual,) = _run_checkpoint(prefix, inputs)
    _assert_close(actual, expected, "V1 net")


def test_convert_symbol_needs_no_weights():
    symbol, input_dim = convert_symbol(os.path.join(FIXTURES, "smallnet.prototxt"))
    assert input_dim == (2, 3, 11, 11)
    _, out_shapes, _ = symbol.infer_shape(data=input_dim)
    assert out_shapes == [(2, 5)]


def test_data_layer_inputs_take_their_shape_from_the_caller():
    from mxkit.caffe.convert import convert_net
    from mxkit.caffe.reader import parse_prototxt

    net = parse_prototxt('layer { name: "d" type: "Data" top: "data" top: "label" }\n'
                         'layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" '
                         'inner_product_param { num_output: 3 } }\n'
                         'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }\n')
    converted = convert_net(net, input_shapes={"data": (4, 2, 3, 3)})
    assert converted.input_shapes == {"data": (4, 2, 3, 3), "label": None}
    assert converted.symbol.list_arguments() == ["data", "fc_weight", "fc_bias", "label"]
    _, out_shapes, _ = converted.symbol.infer_shape(data=(4, 2, 3, 3), label=(4,))
    assert out_shapes == [(4, 3)]


def test_mean_is_converted_to_rgb_and_saved(tmp_path):
    path = os.path.join(FIXTURES, "mean.binaryproto")
    bgr = (np.arange(60, dtype=np.float32) * 1.5 + 100).reshape(3, 4, 5)
    out = tmp_path / "mean.nd"
    mean = convert_mean(path, out)
    np.testing.assert_array_equal(mean.asnumpy(), bgr[::-1])
    loaded = nd.load(str(out))
    assert list(loaded) == ["mean_image"]
    np.testing.assert_array_equal(loaded["mean_image"].asnumpy(), bgr[::-1])
    np.testing.assert_array_equal(convert_mean(path, bgr_to_rgb=False).asnumpy(), bgr)


MXNET_PYTHON = os.environ.get("MXKIT_MXNET_PYTHON")
_MXNET_RUNNER = """
import json, sys
import mxnet as mx, numpy as np
for case in json.load(open(sys.argv[1])):
    symbol = mx.sym.load(case["prefix"] + "-symbol.json")
    saved = mx.nd.load(case["prefix"] + "-0000.params")
    saved = saved if isinstance(saved, dict) else {}
    inputs = dict(np.load(case["inputs"]))
    args = {k[4:]: v for k, v in saved.items() if k.startswith("arg:")}
    args.update({k: mx.nd.array(v) for k, v in inputs.items()})
    auxs = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    executor = symbol.bind(mx.cpu(), args, grad_req="null", aux_states=auxs)
    outputs = [out.asnumpy() for out in executor.forward(is_train=False)]
    np.savez(case["outputs"], *outputs)
"""


@pytest.mark.skipif(not MXNET_PYTHON, reason="set MXKIT_MXNET_PYTHON to an MXNet 1.9.1 interpreter")
def test_mxnet_runs_the_converted_files_as_caffe_would(tmp_path):
    """MXNet 1.9.1 loads what we wrote (symbol JSON and .params) and computes what Caffe computes."""
    import json
    import subprocess

    cases, expected = [], {}
    for case in [*LAYER_CASES, "smallnet", "smallnet_v1"]:
        folder = FIXTURES if case.startswith("smallnet") else os.path.join(FIXTURES, "layers")
        prototxt, caffemodel = os.path.join(folder, f"{case}.prototxt"), os.path.join(folder, f"{case}.caffemodel")
        prefix = str(tmp_path / case)
        convert_model(prototxt, caffemodel, prefix, bgr_to_rgb=False)
        net = _parsed(prototxt)
        shapes = {top: tuple(s.dim) for layer in net.layer if layer.type == "Input"
                  for top, s in zip(layer.top, layer.input_param.shape)}
        shapes.update({name: tuple(s.dim) for name, s in zip(net.input, net.input_shape)})
        shapes.update({name: tuple(net.input_dim[4 * i:4 * i + 4]) for i, name in enumerate(net.input)
                       if len(net.input_dim)})
        inputs = _inputs_for(net, shapes, seed=13)
        np.savez(tmp_path / f"{case}-inputs.npz", **inputs)
        reference = CaffeReference(net, _caffe_weights(caffemodel)).forward(inputs)
        expected[case] = [reference[name] for name in _output_blobs(net)]
        cases.append({"prefix": prefix, "inputs": str(tmp_path / f"{case}-inputs.npz"),
                      "outputs": str(tmp_path / f"{case}-mxnet.npz")})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    run = subprocess.run([MXNET_PYTHON, "-c", _MXNET_RUNNER, str(tmp_path / "cases.json")], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    for case, spec in zip(expected, cases):
        with np.load(spec["outputs"]) as outputs:
            actual = [outputs[f"arr_{i}"] for i in range(len(outputs.files))]
        assert len(actual) == len(expected[case]), case
        for index, (out, ref) in enumerate(zip(actual, expected[case])):
            _assert_close(out, ref, f"MXNet 1.9.1 on {case}, output {index}")


def test_current_prototxt_with_a_v1_caffemodel(tmp_path):
    """Old model zoos ship V1 caffemodels beside upgraded deploy prototxts: the weights match by layer name."""
    from google.protobuf import text_format

    upgraded = tmp_path / "deploy.prototxt"
    upgraded.write_text(text_format.MessageToString(_parsed(os.path.join(FIXTURES, "smallnet_v1.prototxt"))))
    assert "layers {" not in upgraded.read_text() and 'type: "Convolution"' in upgraded.read_text()
    caffemodel = os.path.join(FIXTURES, "smallnet_v1.caffemodel")
    _, arg_params, _, _ = convert_model(upgraded, caffemodel, bgr_to_rgb=False)
    np.testing.assert_array_equal(arg_params["conv1_weight"].asnumpy(), _caffe_weights(caffemodel)["conv1"][0])


def test_rgb_swap_follows_channel_agnostic_layers_only():
    """A convolution after Power (even in place on the input) sees the image's channels; after BatchNorm not."""
    from mxkit.caffe.convert import convert_net
    from mxkit.caffe.reader import parse_prototxt

    head = 'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }\n'
    conv = ('layer { name: "conv" type: "Convolution" bottom: "%s" top: "conv" '
            'convolution_param { num_output: 2 kernel_size: 1 bias_term: false } }\n')
    weight = np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1)
    cases = {
        "power_in_place": ('layer { name: "p" type: "Power" bottom: "data" top: "data" power_param { scale: 0.5 } }\n'
                           + conv % "data", True),
        "power_then_relu": ('layer { name: "p" type: "Power" bottom: "data" top: "scaled" }\n'
                            'layer { name: "r" type: "ReLU" bottom: "scaled" top: "scaled" }\n' + conv % "scaled",
                            True),
        "batchnorm_first": ('layer { name: "bn" type: "BatchNorm" bottom: "data" top: "data" }\n' + conv % "data",
                            False),
    }
    for name, (body, swapped) in cases.items():
        converted = convert_net(parse_prototxt(head + body))
        blobs = {"conv": [weight], "bn": [np.zeros(3, np.float32), np.ones(3, np.float32), np.ones(1, np.float32)]}
        args, _ = converted.convert_params(blobs.get)
        np.testing.assert_array_equal(args["conv_weight"], weight[:, ::-1] if swapped else weight, err_msg=name)
