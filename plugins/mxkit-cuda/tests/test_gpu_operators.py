"""Every operator on ``gpu(0)`` against the CPU backend: outputs, input gradients and aux states.

The neural-network operators run on the inputs of the MXNet 1.9.1 fixtures of mxkit-ndarray;
the array operators on a table of calls covering the registry. Operators that draw random
numbers draw different ones on each device, so they are checked by statistics instead.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from gpu_harness import assert_same_on_gpu, run_operator
from mxkit.core import gpu
from mxkit.ndarray.ops.unary import UNARY

NN_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "packages", "mxkit-ndarray", "tests",
                           "fixtures", "nn")
sys.path.insert(0, NN_FIXTURES)
import nn_harness  # noqa: E402

pytestmark = pytest.mark.gpu
RANDOM_FIXTURES = ("dropout", "rrelu")


def _nn_fixture_names():
    return [n for n in nn_harness.fixture_names() if not n.startswith(RANDOM_FIXTURES)]


@pytest.mark.parametrize("name", _nn_fixture_names())
def test_nn_operator_matches_cpu(name):
    record = nn_harness.load_fixture(name)
    inputs = nn_harness.indexed(record, "in_")
    heads = nn_harness.indexed(record, "head_")
    diff = [int(i) for i in record["diff"]]
    assert_same_on_gpu(record["op"], inputs, record["params"], aux=nn_harness.indexed(record, "aux_"),
                       heads=heads or None, diff=diff, train=bool(record["train"]), rtol=2e-4, atol=2e-5)


RNG = np.random.default_rng(11)


def _x(*shape, kind="any", dtype=np.float32):
    x = RNG.standard_normal(shape)
    if kind == "pos":
        x = np.abs(x) + 0.5
    elif kind == "unit":
        x = np.tanh(x) * 0.8
    elif kind == "above1":
        x = np.abs(x) + 1.5
    elif kind == "away0":
        x = np.sign(x) * (np.abs(x) + 0.2)
    return x.astype(dtype)


_DOMAIN = {"log": "pos", "log10": "pos", "log2": "pos", "log1p": "pos", "sqrt": "pos", "rsqrt": "pos",
           "rcbrt": "pos", "cbrt": "pos", "reciprocal": "pos", "arcsin": "unit", "arccos": "unit",
           "arctanh": "unit", "arccosh": "above1", "abs": "away0", "relu": "away0", "gamma": "pos",
           "gammaln": "pos"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_operator_matches_cpu(name):
    assert_same_on_gpu(name, [_x(4, 33, kind=_DOMAIN.get(name, "away0"))], {})


_BINARY = ["broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_power",
           "broadcast_maximum", "broadcast_minimum", "broadcast_hypot", "broadcast_mod", "broadcast_equal",
           "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
           "broadcast_lesser_equal", "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor"]


@pytest.mark.parametrize("name", _BINARY)
def test_broadcast_binary_operator_matches_cpu(name):
    assert_same_on_gpu(name, [_x(3, 4, 5, kind="pos"), _x(3, 1, 5, kind="pos")], {})


_SCALAR = ["_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar", "_rdiv_scalar",
           "_power_scalar", "_rpower_scalar", "_maximum_scalar", "_minimum_scalar", "_mod_scalar",
           "_rmod_scalar", "_hypot_scalar", "_equal_scalar", "_greater_scalar", "_lesser_equal_scalar"]


@pytest.mark.parametrize("name", _SCALAR)
def test_scalar_operator_matches_cpu(name):
    assert_same_on_gpu(name, [_x(5, 7, kind="pos")], {"scalar": 1.3})


_ELEMWISE = ["elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_maximum", "_minimum", "_power",
             "_hypot", "_equal", "_greater"]


@pytest.mark.parametrize("name", _ELEMWISE)
def test_elementwise_binary_operator_matches_cpu(name):
    assert_same_on_gpu(name, [_x(6, 5, kind="pos"), _x(6, 5, kind="pos")], {})


CALLS = [
    ("sum", [_x(3, 4, 5)], {"axis": (0, 2), "keepdims": True}),
    ("mean", [_x(3, 4, 5)], {"axis": 1}),
    ("prod", [_x(3, 4, kind="pos")], {"axis": 0}),
    ("max", [_x(3, 4, 5)], {"axis": 2}),
    ("min", [_x(3, 4, 5)], {}),
    ("norm", [_x(3, 4)], {"ord": 2, "axis": 1}),
    ("nansum", [_x(3, 4)], {"axis": 0}),
    ("argmax", [_x(3, 7)], {"axis": 1}),
    ("argmin", [_x(3, 7)], {"axis": 0}),
    ("argmax_channel", [_x(4, 6)], {}),
    ("softmax", [_x(4, 9)], {"axis": -1}),
    ("softmax", [_x(4, 9)], {"axis": 0, "temperature": 2.0}),
    ("log_softmax", [_x(4, 9)], {"axis": 1}),
    ("dot", [_x(8, 16), _x(16, 5)], {}),
    ("dot", [_x(16, 8), _x(5, 16)], {"transpose_a": True, "transpose_b": True}),
    ("batch_dot", [_x(3, 4, 6), _x(3, 6, 2)], {}),
    ("_linalg_gemm2", [_x(2, 3, 4), _x(2, 4, 5)], {"alpha": 0.5}),
    ("transpose", [_x(2, 3, 4)], {"axes": (2, 0, 1)}),
    ("reshape", [_x(4, 6)], {"shape": (3, -1)}),
    ("Flatten", [_x(2, 3, 4)], {}),
    ("expand_dims", [_x(3, 4)], {"axis": 1}),
    ("squeeze", [_x(3, 1, 4)], {}),
    ("SwapAxis", [_x(2, 3, 4)], {"dim1": 0, "dim2": 2}),
    ("tile", [_x(2, 3)], {"reps": (2, 3)}),
    ("repeat", [_x(2, 3)], {"repeats": 3, "axis": 1}),
    ("reverse", [_x(3, 4)], {"axis": 1}),
    ("slice", [_x(5, 6)], {"begin": (1, 0), "end": (4, 5), "step": (2, 2)}),
    ("slice_axis", [_x(5, 6)], {"axis": 1, "begin": 1, "end": -1}),
    ("clip", [_x(5, 6)], {"a_min": -0.5, "a_max": 0.5}),
    ("broadcast_to", [_x(1, 4)], {"shape": (3, 4)}),
    ("broadcast_axis", [_x(3, 1)], {"axis": 1, "size": 4}),
    ("Concat", [_x(2, 3), _x(2, 5)], {"dim": 1, "num_args": 2}),
    ("stack", [_x(2, 3), _x(2, 3)], {"axis": 1, "num_args": 2}),
    ("SliceChannel", [_x(2, 6)], {"num_outputs": 3, "axis": 1}),
    ("where", [(_x(3, 4) > 0).astype(np.float32), _x(3, 4), _x(3, 4)], {}),
    ("take", [_x(5, 3), np.array([4, 0, 2, 2], dtype=np.float32)], {"axis": 0}),
    ("pick", [_x(4, 5), np.array([0, 4, 2, 1], dtype=np.float32)], {"axis": 1}),
    ("gather_nd", [_x(3, 4), np.array([[0, 2, 1], [3, 0, 3]], dtype=np.float32)], {}),
    ("one_hot", [np.array([1, 0, 3], dtype=np.float32)], {"depth": 4}),
    ("Embedding", [np.array([[1, 0], [3, 3]], dtype=np.float32), _x(5, 3)], {"input_dim": 5, "output_dim": 3}),
    ("sort", [_x(3, 6)], {"axis": 1}),
    ("argsort", [_x(3, 6)], {"axis": 1, "is_ascend": False}),
    ("topk", [_x(3, 6)], {"axis": 1, "k": 2, "ret_typ": "value"}),
    ("topk", [_x(3, 6)], {"axis": 1, "k": 2, "ret_typ": "indices"}),
    ("Cast", [_x(3, 4)], {"dtype": "float16"}),
    ("Cast", [_x(3, 4)], {"dtype": "int32"}),
    ("smooth_l1", [_x(3, 4)], {"scalar": 1.5}),
    ("BlockGrad", [_x(3, 4)], {}),
    ("identity", [_x(3, 4)], {}),
    ("zeros_like", [_x(3, 4)], {}),
    ("ones_like", [_x(3, 4)], {}),
    ("broadcast_like", [_x(1, 4), _x(3, 4)], {}),
    ("reshape_like", [_x(2, 6), _x(3, 4)], {}),
    ("logical_not", [(_x(3, 4) > 0).astype(np.float32)], {}),
]


@pytest.mark.parametrize("name, inputs, params", CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_array_operator_matches_cpu(name, inputs, params):
    assert_same_on_gpu(name, inputs, params)


@pytest.mark.parametrize("name, params", [
    ("_zeros", {"shape": (3, 4)}), ("_ones", {"shape": (2, 5), "dtype": "int32"}),
    ("_full", {"shape": (2, 2), "value": 2.5}), ("_arange", {"start": 1.0, "stop": 7.0, "step": 1.5}),
    ("_eye", {"N": 4, "M": 3, "k": 1}),
])
def test_creation_operator_matches_cpu(name, params):
    from mxkit.core import cpu
    from mxkit.ndarray.invoke import invoke_by_name

    want = invoke_by_name(name, ctx=cpu(0), **params).asnumpy()
    got = invoke_by_name(name, ctx=gpu(0), **params).asnumpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_float16_convolution_and_dense_run_on_tensor_cores_within_half_precision():
    data, weight = _x(4, 8, 12, 12, dtype=np.float16), _x(16, 8, 3, 3, dtype=np.float16) * 0.2
    assert_same_on_gpu("Convolution", [data, weight], {"kernel": (3, 3), "num_filter": 16, "no_bias": True},
                       rtol=2e-2, atol=2e-2)
    assert_same_on_gpu("FullyConnected", [_x(8, 64, dtype=np.float16), _x(32, 64, dtype=np.float16) * 0.1],
                       {"num_hidden": 32, "no_bias": True}, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("name, params", [
    ("_random_uniform", {"low": -2.0, "high": 3.0, "shape": (200000,)}),
    ("_random_normal", {"loc": 1.0, "scale": 2.0, "shape": (200000,)}),
])
def test_random_samplers_draw_on_the_gpu_with_the_right_statistics(name, params):
    from mxkit.ndarray.invoke import invoke_by_name

    out = invoke_by_name(name, ctx=gpu(0), **params)
    assert out.context == gpu(0)
    values = out.asnumpy()
    if name == "_random_uniform":
        assert values.min() >= -2.0 and values.max() < 3.0
        assert abs(values.mean() - 0.5) < 0.02
    else:
        assert abs(values.mean() - 1.0) < 0.02 and abs(values.std() - 2.0) < 0.02


def test_random_seed_makes_gpu_draws_repeatable():
    from mxkit.ndarray import random as nd_random

    nd_random.seed(123)
    first = nd_random.uniform(shape=(1000,), ctx=gpu(0)).asnumpy()
    nd_random.seed(123)
    second = nd_random.uniform(shape=(1000,), ctx=gpu(0)).asnumpy()
    np.testing.assert_array_equal(first, second)


def test_dropout_on_gpu_drops_the_expected_fraction_and_scales_the_rest():
    x = np.ones((400, 500), dtype=np.float32)
    outputs, grads, _ = run_operator(gpu(0), "Dropout", [x], {"p": 0.3}, heads=[np.ones_like(x)])
    kept = outputs[0] != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(outputs[0][kept], 1 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(grads[0] != 0, kept)  # the gradient flows through the same mask


CONVOLUTIONS = [
    ([_x(4, 8, 14, 14), _x(16, 8, 3, 3), _x(16)], {"kernel": (3, 3), "num_filter": 16, "pad": (1, 1)}),
    ([_x(4, 8, 15, 15), _x(16, 8, 1, 1)], {"kernel": (1, 1), "num_filter": 16, "stride": (2, 2), "no_bias": True}),
    ([_x(4, 8, 15, 15), _x(16, 8, 1, 3)], {"kernel": (1, 3), "num_filter": 16, "stride": (2, 2), "no_bias": True}),
    ([_x(2, 6, 9, 11), _x(6, 2, 3, 3), _x(6)],
     {"kernel": (3, 3), "num_filter": 6, "num_group": 3, "dilate": (2, 1), "pad": (2, 1)}),
    ([_x(2, 4, 20), _x(8, 4, 5), _x(8)], {"kernel": (5,), "num_filter": 8, "stride": (2,)}),
    ([_x(1, 3, 5, 6, 7), _x(4, 3, 3, 3, 3), _x(4)], {"kernel": (3, 3, 3), "num_filter": 4, "pad": (1, 1, 1)}),
    ([_x(2, 3, 8, 8, dtype=np.float64), _x(5, 3, 3, 3, dtype=np.float64), _x(5, dtype=np.float64)],
     {"kernel": (3, 3), "num_filter": 5}),
]


@pytest.mark.parametrize("inputs, params", CONVOLUTIONS, ids=[str(i) for i in range(len(CONVOLUTIONS))])
@pytest.mark.parametrize("cudnn_off", [False, True], ids=["cudnn", "im2col"])
def test_convolution_through_cudnn_and_im2col_matches_cpu(inputs, params, cudnn_off):
    assert_same_on_gpu("Convolution", inputs, dict(params, cudnn_off=cudnn_off))


@pytest.mark.parametrize("autotune", [True, False], ids=["measured", "heuristic"])
def test_measured_and_heuristic_algorithm_choices_both_match_cpu(autotune):
    from mxkit.core import config
    from mxkit_cuda import cudnn

    if cudnn.library() is None:
        pytest.skip("cuDNN is not installed")
    # a 1x1 convolution goes through cuDNN only with measured algorithms (cuBLAS otherwise)
    for inputs, params in CONVOLUTIONS[:2]:
        with config.override(cuda_conv_autotune=autotune):
            assert_same_on_gpu("Convolution", inputs, dict(params, cudnn_off=False))
    searched = [plan.searched for plan in cudnn._plans.values()]
    if autotune:  # every direction of the geometries just run was timed, not guessed
        assert {"forward", "backward_data", "backward_filter"} in searched


def test_cudnn_is_found_where_it_is_installed():
    from mxkit_cuda import cudnn

    try:
        import nvidia.cudnn  # noqa: F401
    except ImportError:
        pytest.skip("the nvidia-cudnn wheel is not installed")
    assert cudnn.library() is not None


def test_tf32_convolution_stays_within_tensor_core_precision():
    from mxkit.core import config, cpu

    inputs = [_x(8, 64, 28, 28), _x(64, 64, 3, 3) * 0.05]
    params = {"kernel": (3, 3), "num_filter": 64, "pad": (1, 1), "no_bias": True}
    want = run_operator(cpu(0), "Convolution", inputs, params)
    with config.override(cuda_tf32=True):
        got = run_operator(gpu(0), "Convolution", inputs, params)
    # TF32 keeps 10 mantissa bits: each result is within about 1e-3 of the norm of its terms,
    # so compare whole arrays by relative norm (single small sums may lose more)
    for ours, reference in [(got[0][0], want[0][0]), *((got[1][i], want[1][i]) for i in want[1])]:
        assert np.linalg.norm(ours - reference) <= 5e-3 * np.linalg.norm(reference)


@pytest.mark.parametrize("act_type", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_matches_cpu_with_zeros_and_non_finite_values(act_type):
    # the CUDA relu kernels write straight into their outputs; zeros, NaN and inf must come out
    # as the generic kernels give them (a zero output takes no gradient, NaN * 0 stays NaN)
    x = _x(5, 40)
    heads = [RNG.standard_normal((5, 40)).astype(np.float32)]
    x[0, :3] = [0.0, -0.0, 1e-30]
    if act_type == "relu":  # the others keep the generic kernels: finite values are enough
        x[0, 3:6] = [np.nan, np.inf, -np.inf]
        heads[0][1, :3] = [np.nan, np.inf, -np.inf]
    rtol = 1e-4 if act_type == "relu" else 2e-4
    with np.errstate(all="ignore"):
        assert_same_on_gpu("Activation", [x], {"act_type": act_type}, heads=heads, rtol=rtol, atol=1e-5)


_POOLING_CASES = [
    # data shape, params: cuDNN serves the first ones, the generic kernel the last three
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max"}),
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"}),
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
                    "count_include_pad": False}),
    ((2, 3, 7, 7), {"kernel": (7, 7), "global_pool": True, "pool_type": "avg"}),
    ((2, 3, 7, 6), {"kernel": (1, 1), "global_pool": True, "pool_type": "max"}),
    ((2, 3, 10), {"kernel": (3,), "stride": (2,), "pool_type": "max"}),
    ((2, 2, 5, 6, 7), {"kernel": (2, 3, 2), "stride": (1, 2, 2), "pad": (1, 1, 0), "pool_type": "avg"}),
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full", "pool_type": "max"}),
    ((2, 3, 10, 10), {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full", "pool_type": "avg"}),
    ((2, 3, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pool_type": "max", "cudnn_off": True}),
    ((2, 3, 8, 8), {"kernel": (2, 2), "stride": (2, 2), "pool_type": "lp", "p_value": 2}),
]


@pytest.mark.parametrize("shape, params", _POOLING_CASES)
def test_pooling_matches_cpu(shape, params):
    # distinct values: where a window's maximum is tied, cuDNN may give the gradient to another cell
    x = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float32) / np.prod(shape)
    assert_same_on_gpu("Pooling", [x], params, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, params, dtype", [
    ((6, 10), {"num_hidden": 7}, np.float32),
    ((6, 2, 3, 2), {"num_hidden": 5, "no_bias": True}, np.float32),
    ((4, 3, 6), {"num_hidden": 5, "flatten": False}, np.float32),
    ((6, 10), {"num_hidden": 7}, np.float64),
])
def test_fully_connected_through_cudnn_matches_cpu(shape, params, dtype):
    # the CUDA plugin runs FullyConnected as a 1x1 cuDNN convolution in full float32 precision
    features = int(np.prod(shape[1:])) if params.get("flatten", True) else shape[-1]
    inputs = [_x(*shape, dtype=dtype), _x(params["num_hidden"], features, dtype=dtype)]
    if not params.get("no_bias"):
        inputs.append(_x(params["num_hidden"], dtype=dtype))
    tolerance = {"rtol": 1e-10, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-5}
    assert_same_on_gpu("FullyConnected", inputs, params, **tolerance)
