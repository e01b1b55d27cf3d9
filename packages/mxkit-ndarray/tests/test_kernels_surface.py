"""mxkit.ndarray.kernels, the published surface for kernel plugins: every name is there and
documented, and the geometry helpers agree with the operators' shape inference."""

import inspect

import numpy as np
from mxkit import ndarray as nd
from mxkit.ndarray import kernels


def test_every_published_name_exists_and_is_documented():
    for name in kernels.__all__:
        value = getattr(kernels, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"mxkit.ndarray.kernels.{name} has no docstring"


def test_conv_and_pool_geometry_give_the_operators_output_shapes():
    data = nd.zeros((2, 3, 9, 7))
    conv = nd.get_op("Convolution")
    params = conv.parse_params({"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "num_filter": 4})
    g = kernels.conv_geometry(params, data)
    out = nd.Convolution(data, nd.zeros((4, 3, 3, 2)), nd.zeros((4,)), kernel=(3, 2), stride=(2, 1), pad=(1, 0),
                         num_filter=4)
    expected = tuple((s + 2 * p - k) // st + 1 for s, p, k, st in zip(g.spatial, g.pad, g.dilated_kernel, g.stride))
    assert out.shape == (2, 4, *expected)
    pool_params = nd.get_op("Pooling").parse_params({"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})
    pool = kernels.PoolGeometry(pool_params, data.shape)
    assert nd.Pooling(data, kernel=(2, 2), stride=(2, 2), pool_type="max").shape == (2, 3, *pool.out_spatial)
    deconv_params = nd.get_op("Deconvolution").parse_params({"kernel": (3, 3), "stride": (2, 2), "num_filter": 5})
    _, _, out_spatial = kernels.deconv_geometry(deconv_params, data.shape)
    result = nd.Deconvolution(data, nd.zeros((3, 5, 3, 3)), kernel=(3, 3), stride=(2, 2), num_filter=5, no_bias=True)
    assert result.shape == (2, 5, *out_spatial)


def test_the_generic_kernel_of_an_operator_is_reachable():
    x = np.array([-1.0, 2.0], np.float32)
    out = np.empty_like(x)
    kernels.get_op("relu").kernel(np, [x], [out], {})
    np.testing.assert_array_equal(out, [0.0, 2.0])
    assert kernels.wanted({"_req": ["null"]}, 0) is False and kernels.wanted({}, 0) is True
    program = kernels.parse_program('{"dtype": "float32", "num_inputs": 1, "steps": [["add", "x0", 1.0]]}')
    assert "1.0f" in kernels.render_c_expression(program, ["a"])
