"""``mx.contrib`` and ``mxkit convert caffe``: the facade's doors to mxkit-caffe."""

import os

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MissingComponentError
from mxkit.mx.cli import main

CAFFE_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "mxkit-caffe", "tests",
                              "fixtures")
PROTOTXT = os.path.join(CAFFE_FIXTURES, "smallnet.prototxt")
CAFFEMODEL = os.path.join(CAFFE_FIXTURES, "smallnet.caffemodel")
MEAN = os.path.join(CAFFE_FIXTURES, "mean.binaryproto")


def test_contrib_names_the_components_modules():
    import mxkit.caffe
    import mxkit.ndarray.contrib
    import mxkit.symbol.contrib

    assert mx.contrib.caffe is mxkit.caffe
    assert mx.contrib.caffe.convert_model is mxkit.caffe.convert_model
    assert mx.contrib.nd is mxkit.ndarray.contrib and mx.contrib.sym is mxkit.symbol.contrib
    assert "caffe" in dir(mx.contrib)
    with pytest.raises(AttributeError, match="the names are: amp, autograd, caffe"):
        _ = mx.contrib.not_a_module


def test_contrib_says_what_to_install(monkeypatch):
    monkeypatch.setitem(mx.contrib.SUBMODULES, "onnx", ("mxkit.onnx", "mxkit-onnx", "pip install mxkit-onnx"))
    with pytest.raises(MissingComponentError, match=r"mx.contrib.onnx needs the mxkit-onnx component.*pip install"):
        _ = mx.contrib.onnx


def test_convert_caffe_writes_a_checkpoint_and_the_mean(tmp_path, capsys):
    prefix = str(tmp_path / "smallnet")
    assert main(["convert", "caffe", PROTOTXT, CAFFEMODEL, prefix, "--mean", MEAN]) == 0
    assert "wrote" in capsys.readouterr().out
    symbol = mx.sym.load(f"{prefix}-symbol.json")
    params = mx.nd.load(f"{prefix}-0000.params")
    api_symbol, arg_params, aux_params, input_dim = mx.contrib.caffe.convert_model(PROTOTXT, CAFFEMODEL)
    assert input_dim == (2, 3, 11, 11)
    assert symbol.list_arguments() == api_symbol.list_arguments()
    assert sorted(params) == sorted([f"arg:{k}" for k in arg_params] + [f"aux:{k}" for k in aux_params])
    for name, value in arg_params.items():
        np.testing.assert_array_equal(params[f"arg:{name}"].asnumpy(), value.asnumpy())
    mean = mx.nd.load(f"{prefix}-mean.nd")["mean_image"]
    assert mean.shape == (3, 4, 5)


def test_convert_caffe_symbol_only_and_bgr(tmp_path):
    prefix = str(tmp_path / "net")
    assert main(["convert", "caffe", PROTOTXT, prefix]) == 0
    assert os.listdir(tmp_path) == ["net-symbol.json"]
    rgb, bgr = str(tmp_path / "rgb"), str(tmp_path / "bgr")
    assert main(["convert", "caffe", PROTOTXT, CAFFEMODEL, rgb]) == 0
    assert main(["convert", "caffe", PROTOTXT, CAFFEMODEL, bgr, "--bgr"]) == 0
    w_rgb = mx.nd.load(f"{rgb}-0000.params")["arg:conv1_7x7_s2_weight"].asnumpy()
    w_bgr = mx.nd.load(f"{bgr}-0000.params")["arg:conv1_7x7_s2_weight"].asnumpy()
    np.testing.assert_array_equal(w_rgb, w_bgr[:, ::-1])


def test_convert_caffe_errors_are_reported_and_nothing_is_written(tmp_path, capsys):
    bad = tmp_path / "bad.prototxt"
    bad.write_text('input: "data"\ninput_shape { dim: 1 dim: 3 }\n'
                   'layer { name: "py" type: "Python" bottom: "data" top: "out" }\n')
    assert main(["convert", "caffe", str(bad), CAFFEMODEL, str(tmp_path / "out"), "--mean", MEAN]) == 2
    err = capsys.readouterr().err
    assert "mxkit: error:" in err and "'py' (type Python)" in err
    assert main(["convert", "caffe", PROTOTXT, PROTOTXT, str(tmp_path / "out")]) == 2
    assert "damaged or truncated caffemodel" in capsys.readouterr().err
    assert main(["convert", "caffe", PROTOTXT, CAFFEMODEL, "x", str(tmp_path / "out")]) == 2
    assert "expected DEPLOY.prototxt [MODEL.caffemodel] PREFIX" in capsys.readouterr().err
    assert main(["convert", "caffe", PROTOTXT, str(tmp_path / "absent" / "out")]) == 2
    assert "does not exist; create it first" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.prototxt"]


def test_input_shape_option(tmp_path, capsys):
    deploy = tmp_path / "data.prototxt"
    deploy.write_text('layer { name: "d" type: "Data" top: "data" }\n'
                      'layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" '
                      'inner_product_param { num_output: 3 } }\n')
    assert main(["convert", "caffe", str(deploy), str(tmp_path / "net"), "--input-shape", "data=2,4"]) == 0
    with pytest.raises(SystemExit):
        main(["convert", "caffe", str(deploy), str(tmp_path / "net"), "--input-shape", "data"])
    assert "is not NAME=D1,D2" in capsys.readouterr().err
