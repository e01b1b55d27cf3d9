"""The operator registry and MXNet string parameters."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.params import Param, ParamError, format_value, schema
from mxkit.ndarray.registry import UnknownOperatorError, get_op, get_registry, reload_kernels
from mxkit.ndarray.shapes import broadcast_shape, infer_reshape

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)


def test_parses_mxnet_string_attributes():
    s = schema([Param("kernel", "shape"), Param("no_bias", "bool", False), Param("act", "str", "relu",
                                                                             choices=("relu", "tanh")),
                Param("eps", "float", 1e-5), Param("axis", "int", None, optional=True)])
    typed = s.parse({"kernel": "(3, 3)", "no_bias": "True", "act": "tanh", "eps": "0.001", "axis": "None"}, "Op")
    assert typed == {"kernel": (3, 3), "no_bias": True, "act": "tanh", "eps": 0.001, "axis": None}
    assert s.parse({"kernel": [2, 2], "no_bias": 0}, "Op")["no_bias"] is False
    strings = s.to_strings(typed)
    assert strings == {"kernel": "(3, 3)", "no_bias": "True", "act": "tanh", "eps": "0.001"}
    assert s.parse(strings, "Op") == {**typed, "axis": None}


def test_format_value_matches_mxnet_spelling():
    assert format_value((3,)) == "(3,)"
    assert format_value(()) == "()"
    assert format_value(False) == "False"
    assert format_value(None) == "None"


@pytest.mark.parametrize("values, words", [
    ({}, ["needs parameter 'kernel'"]),
    ({"kernel": "(3, 3)", "kernal": 2}, ["unknown parameter 'kernal'", "kernel, act"]),
    ({"kernel": "(a, 3)"}, ["bad value", "'kernel'"]),
    ({"kernel": (3, 3), "act": "gelu"}, ["'act' is 'gelu'", "relu, tanh"]),
])
def test_bad_parameters_are_named(values, words):
    s = schema([Param("kernel", "shape"), Param("act", "str", "relu", choices=("relu", "tanh"))])
    with pytest.raises(ParamError) as info:
        s.parse(values, "Convolution")
    assert "Convolution" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_binary_operators_ignore_keywords_as_mxnet_does():
    # MXNet registers its binary operators without a parameter parser: any keyword is kept as
    # a free-form attribute and ignored (test_loss.test_cosine_loss passes axis=1).
    lhs, rhs = np.array([0.0], np.float32), np.array([[0.5], [-1.0]], np.float32)
    got = mx.nd.broadcast_maximum(mx.nd.array(lhs), mx.nd.array(rhs), axis=1).asnumpy()
    np.testing.assert_array_equal(got, np.maximum(lhs, rhs))
    got = mx.nd.elemwise_add(mx.nd.array(rhs), mx.nd.array(rhs), foo="bar").asnumpy()
    np.testing.assert_array_equal(got, rhs + rhs)
    # operators with parameters still name a misspelt one
    with pytest.raises(ParamError, match="unknown parameter 'axs'"):
        mx.nd.sum(mx.nd.array(rhs), axs=1)
    assert schema(ignores_unknown=True).parse({"axis": 1}, "broadcast_maximum") == {}


def test_registry_lookup_and_aliases():
    registry = get_registry()
    assert get_op("reshape") is get_op("Reshape")
    assert get_op("_plus") is get_op("elemwise_add")
    assert "broadcast_add" in registry.names()
    with pytest.raises(UnknownOperatorError, match=r"did you mean .*broadcast_add"):
        get_op("broadcast_addd")


def test_operator_definitions_are_complete():
    registry = get_registry()
    for name in registry.names():
        op = registry.get(name)
        assert op.kernel is not None or op.kernels, name
        assert op.docstring().strip(), name


def test_kernel_hook_overrides_generic_kernel():
    from mxkit.core import hookimpl
    from mxkit.core.plugins import register_plugin, unregister_plugin

    calls = []

    class DoublingRelu:
        @hookimpl
        def mxkit_kernels(self, registry):
            def relu_times_two(xp, inputs, outputs, params):
                calls.append(1)
                xp.copyto(outputs[0], 2 * xp.maximum(inputs[0], 0))

            registry.register_kernel("relu", backend="numpy", kernel=relu_times_two)

    register_plugin(DoublingRelu(), name="doubling-relu-test")
    try:
        reload_kernels()
        out = mx.nd.relu(mx.nd.array([-1.0, 3.0])).asnumpy()
        assert calls and out.tolist() == [0.0, 6.0]
    finally:
        unregister_plugin("doubling-relu-test")
        reload_kernels()
    assert mx.nd.relu(mx.nd.array([-1.0, 3.0])).asnumpy().tolist() == [0.0, 3.0]


def test_register_kernel_rejects_non_callables():
    with pytest.raises(MXKitError, match="must be callable"):
        get_registry().register_kernel("relu", backend="numpy", kernel=42)


@pytest.mark.parametrize("src, target, reverse, expected", [
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
])
def test_reshape_special_codes_follow_mxnet_docs(src, target, reverse, expected):
    assert infer_reshape(src, target, reverse, "Reshape") == expected


@pytest.mark.parametrize("target", [(5, -1), (-1, -1), (7,), (2, 3, 4, -5)])
def test_reshape_bad_codes_raise(target):
    with pytest.raises(ShapeError, match=r"cannot reshape \(2, 3, 4\)"):
        infer_reshape((2, 3, 4), target, False, "Reshape")


def test_broadcast_shape_matches_numpy():
    for a, b in [((2, 1, 3), (4, 1)), ((1,), (5, 5)), ((3, 1), (1, 3)), ((), (2,))]:
        assert broadcast_shape(a, b, "x") == np.broadcast_shapes(a, b)
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4, 3\)"):
        broadcast_shape((2, 3), (4, 3), "x")
    assert broadcast_shape((0, 3), (5, 1), "x") == (5, 3)  # unknown dims (0) filled from the other


def test_partial_shape_inference_treats_zero_as_unknown():
    assert get_op("elemwise_add").infer_shape({}, [(0, 3), (2, 0)]) == [(2, 3)]
    assert get_op("broadcast_mul").infer_shape({}, [(0, 3), (2, 1)]) == [(2, 3)]
    dot = get_op("dot")
    assert dot.infer_shape(dot.parse_params({}), [(0, 3), (3, 4)]) == [(0, 4)]
    assert dot.infer_shape(dot.parse_params({}), [(2, 0), (3, 4)]) == [(2, 4)]
    with pytest.raises(ShapeError):
        get_op("elemwise_add").infer_shape({}, [(4, 3), (2, 0)])


def test_operator_metadata_for_graph_executors():
    fc_like = get_op("dot")
    params = fc_like.parse_params({"transpose_b": "True"})
    assert fc_like.list_inputs(params) == ("lhs", "rhs") and fc_like.list_outputs(params) == ("output",)
    assert get_op("Concat").list_inputs(get_op("Concat").parse_params({"num_args": "3"})) == ("arg0", "arg1", "arg2")
    assert get_op("split").count_outputs(get_op("split").parse_params({"num_outputs": 4})) == 4
    assert (0, 0, True) in get_op("Reshape").inplace
    assert 0 in get_op("sigmoid").backward_ignores  # its gradient needs only the output
    assert get_op("Reshape").params.to_strings({"shape": (2, -1), "reverse": False}) == {"shape": "(2, -1)"}
