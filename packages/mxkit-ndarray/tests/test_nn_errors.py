"""Bad input to the neural-network operators fails at shape inference with a ShapeError (or the
registry's ParamError) naming the operator, the parameter and the shapes."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.params import ParamError
from mxkit.ndarray.registry import get_op, get_registry

get_registry()


def infer(name, shapes, **params):
    op = get_op(name)
    return op.infer_shape(op.parse_params(params), [None if s is None else tuple(s) for s in shapes])


@pytest.mark.parametrize("name, shapes, params, words", [
    ("Convolution", [(1, 3, 4, 4), (8, 3, 5, 5), (8,)], {"kernel": (5, 5), "num_filter": 8},
     ["Convolution", "kernel=(5, 5)", "(1, 3, 4, 4)", "pad"]),
    ("Convolution", [(1, 3, 8, 8), (8, 3, 3, 3)], {"kernel": (3, 3), "num_filter": 0, "no_bias": True},
     ["Convolution", "num_filter=0", "positive"]),
    ("Convolution", [(1, 3, 8, 8), (6, 1, 3, 3), (6,)], {"kernel": (3, 3), "num_filter": 6, "num_group": 2},
     ["Convolution", "3 channels", "num_group=2", "(1, 3, 8, 8)"]),
    ("Convolution", [(1, 4, 8, 8), (6, 2, 3, 3), (6,)], {"kernel": (3, 3), "num_filter": 5, "num_group": 2},
     ["num_filter=5", "num_group=2"]),
    ("Convolution", [(1, 3, 8, 8), (8, 2, 3, 3), (8,)], {"kernel": (3, 3), "num_filter": 8},
     ["weight", "(8, 2, 3, 3)", "(8, 3, 3, 3)"]),
    ("Convolution", [(1, 3, 8), (8, 3, 3, 3), (8,)], {"kernel": (3, 3), "num_filter": 8},
     ["(1, 3, 8)", "kernel=(3, 3)", "4 axes"]),
    ("Convolution", [(1, 3, 8, 8), None, None], {"kernel": (3, 3), "num_filter": 8, "stride": (1, 1, 1)},
     ["stride=(1, 1, 1)", "2 values"]),
    ("Convolution", [(1, 3, 8, 8), None, None], {"kernel": (3, 3), "num_filter": 8, "layout": "NHWC"},
     ["layout=NHWC", "NCHW"]),
    ("Deconvolution", [(1, 3, 4, 4), (3, 2, 3, 3)], {"kernel": (3, 3), "num_filter": 2, "stride": (2, 2),
                                                     "adj": (2, 2)}, ["adj=(2, 2)", "stride=(2, 2)"]),
    ("Pooling", [(1, 3, 2, 2)], {"kernel": (3, 3)}, ["Pooling", "kernel=(3, 3)", "(1, 3, 2, 2)"]),
    ("Pooling", [(1, 3, 8, 8)], {"kernel": (3,)}, ["kernel=(3,)", "(1, 3, 8, 8)", "2 values"]),
    ("Pooling", [(3, 8)], {"kernel": (2,)}, ["(3, 8)", "3 to 5 axes"]),
    ("FullyConnected", [(4, 10), (5, 9), (5,)], {"num_hidden": 5}, ["weight", "(5, 9)", "(5, 10)"]),
    ("FullyConnected", [(4, 10), None, None], {"num_hidden": 0}, ["num_hidden=0"]),
    ("SoftmaxOutput", [(4, 10), (5,)], {}, ["SoftmaxOutput", "label shape (5,)", "(4, 10)", "(4,)"]),
    ("GroupNorm", [(2, 6, 4, 4), None, None], {"num_groups": 4}, ["GroupNorm", "num_groups=4", "6", "(2, 6, 4, 4)"]),
    ("GroupNorm", [(2, 6, 4, 4), (6,), None], {"num_groups": 3}, ["GroupNorm", "gamma", "(6,)", "(3,)"]),
    ("LayerNorm", [(2, 5), (2,), (2,)], {}, ["LayerNorm", "gamma", "(2,)", "(5,)"]),
    ("LayerNorm", [(2, 5), None, None], {"axis": 2}, ["LayerNorm", "axis 2"]),
    ("InstanceNorm", [(4, 3), None, None], {}, ["InstanceNorm", "(4, 3)", "3 dimensions"]),
    ("_contrib_AdaptiveAvgPooling2D", [(2, 3, 4)], {"output_size": (2,)}, ["(2, 3, 4)", "4 axes"]),
    ("_contrib_AdaptiveAvgPooling2D", [(2, 3, 4, 4)], {"output_size": (2, 0)}, ["output_size=(2, 0)", "positive"]),
    ("_contrib_BilinearResize2D", [(1, 2, 3, 3)], {"mode": "odd_scale"}, ["odd_scale", "scale_height"]),
    ("_contrib_BilinearResize2D", [(1, 2, 3, 3)], {"height": 0, "width": 4}, ["(0, 4)", "positive"]),
    ("SoftmaxOutput", [(4, 3, 5), (4, 3)], {"multi_output": True}, ["label shape (4, 3)", "(4, 5)"]),
    ("LinearRegressionOutput", [(4, 3), (4, 2)], {}, ["label shape (4, 2)", "(4, 3)"]),
    ("BatchNorm", [(4, 3, 5), (4,), (3,)], {}, ["BatchNorm", "gamma", "(4,)", "(3,)"]),
    ("Embedding", [(2, 3), (5, 4)], {"input_dim": 6, "output_dim": 4}, ["weight", "(5, 4)", "(6, 4)"]),
    ("LRN", [(2, 4, 3, 3)], {"nsize": 4}, ["nsize=4", "odd"]),
    ("Pad", [(1, 2, 3, 4)], {"pad_width": (0, 1, 0, 0, 1, 1, 1, 1)}, ["pad_width", "first four"]),
    ("Pad", [(1, 2, 3, 4)], {"pad_width": (0, 0, 0, 0, 1, 1)}, ["pad_width", "8"]),
    ("Pad", [(1, 2, 3, 4)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 3, 0, 0, 0)}, ["reflect", "axis 2"]),
    ("SequenceMask", [(5, 3, 2), (4,)], {"use_sequence_length": True}, ["sequence_length", "(4,)", "(3,)"]),
    ("UpSampling", [(1, 2, 4, 4), (1, 2, 3, 3)], {"scale": 2, "sample_type": "nearest", "num_args": 2},
     ["(1, 2, 3, 3)", "(8, 8)"]),
    ("Dropout", [(3, 4)], {"p": 1.5}, ["p=1.5", "[0, 1]"]),
])
def test_bad_shapes_raise_shape_errors_that_say_what_and_why(name, shapes, params, words):
    with pytest.raises(ShapeError) as caught:
        infer(name, shapes, **params)
    for word in words:
        assert word in str(caught.value), f"{word!r} missing from: {caught.value}"


@pytest.mark.parametrize("name, params, words", [
    ("Pooling", {"kernel": (2, 2), "pool_type": "median"}, ["pool_type", "median", "max"]),
    ("Convolution", {"kernel": (3, 3)}, ["num_filter"]),
    ("SoftmaxOutput", {"normalization": "mean"}, ["normalization", "valid"]),
    ("BatchNorm", {"momentum": "fast"}, ["momentum", "fast"]),
    ("FullyConnected", {"num_hidden": 3, "bias": True}, ["bias", "no_bias"]),
])
def test_bad_parameters_raise_param_errors(name, params, words):
    with pytest.raises(ParamError) as caught:
        get_op(name).parse_params(params)
    assert isinstance(caught.value, MXKitError)
    for word in words:
        assert word in str(caught.value)


def test_mxnet_string_attributes_parse_to_typed_values():
    params = get_op("Convolution").parse_params({"kernel": "(3, 3)", "num_filter": "8", "no_bias": "True",
                                                 "pad": "(1, 1)", "num_group": "1", "workspace": "512"})
    assert params["kernel"] == (3, 3) and params["num_filter"] == 8 and params["no_bias"] is True
    assert get_op("Convolution").params.to_strings(params) == {"kernel": "(3, 3)", "pad": "(1, 1)",
                                                                "num_filter": "8", "workspace": "512",
                                                                "no_bias": "True"}
    bn = get_op("BatchNorm").parse_params({"eps": "1e-05", "fix_gamma": "False", "use_global_stats": "False"})
    assert bn["eps"] == 1e-5 and bn["fix_gamma"] is False and bn["momentum"] == 0.9


def test_mxnet_defaults():
    assert get_op("Deconvolution").parse_params({"kernel": (2, 2), "num_filter": 1})["no_bias"] is True
    assert get_op("Convolution").parse_params({"kernel": (2, 2), "num_filter": 1})["no_bias"] is False
    assert get_op("BatchNorm").parse_params({})["fix_gamma"] is True
    pool = get_op("Pooling").parse_params({})
    assert pool["pool_type"] == "max" and pool["pooling_convention"] == "valid"
    assert get_op("Dropout").parse_params({})["p"] == 0.5
    assert get_op("SoftmaxOutput").parse_params({})["ignore_label"] == -1.0
    assert np.isclose(get_op("LRN").parse_params({"nsize": 5})["alpha"], 1e-4)
