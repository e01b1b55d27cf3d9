"""``mx.contrib.amp.convert_symbol`` / ``convert_model`` with ``target_dtype="bfloat16"``: the casts (against
those MXNet 1.9.1 inserts into the zoo graphs, fixtures/amp_bf16/casts.json, written by the script beside it),
the dtypes they give, and bfloat16 prediction against float32 within a bound from bfloat16's precision."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mxkit import mx

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes (mxkit[bfloat16])")
BF16 = np.dtype(ml_dtypes.bfloat16)
FIXTURE = Path(__file__).parent / "fixtures" / "amp_bf16" / "casts.json"
ZOO = Path(__file__).resolve().parents[3] / "benchmarks" / "zoo"


def casts(symbol):
    """(cast name, dtype, input entry names) of every amp_cast / amp_multicast, as the fixture lists them."""
    internals = symbol.get_internals()
    found = []
    for output in internals.list_outputs():
        if "_amp_cast_" not in output and "_amp_multicast" not in output:
            continue
        node = internals[output]
        found.append([output[:-len("_output")], node.list_attr().get("dtype", ""),
                      node.get_children().list_outputs()])
    return sorted(found)


@pytest.mark.parametrize("network", sorted(json.loads(FIXTURE.read_text())["networks"]))
def test_casts_are_mxnets_on_the_zoo_graphs(network):
    expected = json.loads(FIXTURE.read_text())["networks"][network]
    converted = mx.contrib.amp.convert_symbol(mx.sym.load(str(ZOO / f"{network}-symbol.json")),
                                              target_dtype="bfloat16")
    assert casts(converted) == expected


def small_net():
    data = mx.sym.var("data")
    conv0 = mx.sym.Convolution(data, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv0")
    bn = mx.sym.BatchNorm(conv0, fix_gamma=False, name="bn0")
    relu = mx.sym.Activation(bn, act_type="relu", name="relu0")
    conv1 = mx.sym.Convolution(relu, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv1")
    residual = mx.sym.elemwise_add(conv1, relu, name="add0")
    pool = mx.sym.Pooling(residual, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool0")
    fc = mx.sym.FullyConnected(pool, num_hidden=10, name="fc0")
    return mx.sym.softmax(fc, name="sm")


def test_dtypes_of_the_converted_graph():
    converted = mx.contrib.amp.convert_symbol(small_net(), target_dtype="bfloat16")
    internals = converted.get_internals()
    # the weights feed casts only: their dtype is the caller's to give (float32 here, as Module's default)
    given = {name: "float32" for name in converted.list_arguments() if not name.startswith("bn0")}
    arg_types, out_types, aux_types = internals.infer_type(**given)
    by_name = dict(zip(internals.list_outputs(), out_types))
    assert by_name["conv0_output"] == by_name["conv1_output"] == by_name["fc0_output"] == BF16
    assert by_name["bn0_output"] == by_name["add0_output"] == by_name["pool0_output"] == BF16
    assert by_name["sm_output"] == np.float32  # softmax runs in float32: its input is cast back
    assert "fc0_output_amp_cast_float32_output" in by_name
    # BatchNorm's parameters and statistics stay float32
    args = dict(zip(converted.list_arguments(), arg_types))
    assert args["bn0_gamma"] == args["bn0_beta"] == np.float32
    assert all(np.dtype(t) == np.float32 for t in aux_types)
    # no cast between a bfloat16 result and the next bfloat16 operator
    assert not any(name.startswith(("relu0", "bn0", "conv0_output")) and "amp_cast" in name for name in by_name)


def test_excluded_names_and_conditional_fp32_stay_float32():
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(1, 1), num_filter=4, name="keep")
    act = mx.sym.Activation(conv, act_type="softrelu", name="soft")
    converted = mx.contrib.amp.convert_symbol(act, target_dtype="bfloat16", excluded_sym_names=["keep"])
    internals = converted.get_internals()
    given = {name: "float32" for name in converted.list_arguments()}
    types = dict(zip(internals.list_outputs(), internals.infer_type(**given)[1]))
    assert types["keep_output"] == np.float32 and types["soft_output"] == np.float32
    assert not [name for name in types if "amp_cast_bfloat16" in name]


def test_float16_and_other_targets_say_what_is_supported():
    with pytest.raises(mx.contrib.amp.AMPNotSupportedError, match="bfloat16"):
        mx.contrib.amp.convert_symbol(small_net(), target_dtype="float16")
    with pytest.raises(mx.contrib.amp.AMPNotSupportedError, match="bfloat16"):
        mx.contrib.amp.convert_model(small_net(), {}, {}, target_dtype="float16")


@pytest.mark.parametrize("cast_optional_params", [False, True])
def test_bf16_prediction_matches_float32(cast_optional_params):
    """Prediction through the converted model against the float32 model.

    Bound: each bfloat16 operator (the two convolutions, BatchNorm, the addition, the pooling, the inner
    product, and the casts of data and weights) rounds its result once to bfloat16, a relative error of at
    most u = 2**-8 on values that, through the next layers, move the logits by at most their own magnitude
    times the layers' gains. The logits' error is bounded to first order by L u sum|contributions|; with L = 12
    roundings and the contributions bounded by the float32 network run on absolute values of weights and data
    (a majorant of every partial sum) it is checked on the logits, before the float32 softmax."""
    net = small_net()
    logits_net = net.get_internals()["fc0_output"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 6, 6)).astype(np.float32)
    module = mx.mod.Module(logits_net, data_names=["data"], label_names=None, context=mx.cpu())
    module.bind(data_shapes=[("data", x.shape)], for_training=False)
    module.init_params(mx.init.Xavier())
    arg_params, aux_params = module.get_params()
    aux_params = {name: mx.nd.array(rng.uniform(0.5, 1.5, value.shape).astype(np.float32))
                  for name, value in aux_params.items()}
    sym, args_bf16, aux_bf16 = mx.contrib.amp.convert_model(logits_net, arg_params, aux_params,
                                                            target_dtype="bfloat16",
                                                            cast_optional_params=cast_optional_params)
    weight_dtype = args_bf16["conv0_weight"].dtype
    assert weight_dtype == (BF16 if cast_optional_params else np.float32)
    assert args_bf16["bn0_gamma"].dtype == np.float32 and aux_bf16["bn0_moving_mean"].dtype == np.float32
    converted = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
    converted.bind(data_shapes=[("data", x.shape)], for_training=False)
    converted.set_params(args_bf16, aux_bf16)
    batch = mx.io.DataBatch([mx.nd.array(x)])
    converted.forward(batch, is_train=False)
    got = converted.get_outputs()[0].asnumpy()
    assert got.dtype == np.float32  # the outputs come back in float32
    module.set_params(arg_params, aux_params)
    module.forward(batch, is_train=False)
    expected = module.get_outputs()[0].asnumpy().astype(np.float64)
    # the majorant: the float32 network on |x| and |weights| (BatchNorm's shift of the mean can only add
    # |mean| * scale: run with the moving statistics' mean at 0 and gamma at |gamma|)
    majorant = mx.mod.Module(logits_net, data_names=["data"], label_names=None, context=mx.cpu())
    majorant.bind(data_shapes=[("data", x.shape)], for_training=False)
    abs_args = {name: mx.nd.array(np.abs(value.asnumpy())) for name, value in arg_params.items()}
    abs_aux = {"bn0_moving_mean": mx.nd.zeros(aux_params["bn0_moving_mean"].shape),
               "bn0_moving_var": aux_params["bn0_moving_var"]}
    abs_args["bn0_beta"] = mx.nd.array(np.abs(arg_params["bn0_beta"].asnumpy())
                                       + np.abs(aux_params["bn0_moving_mean"].asnumpy())
                                       * np.abs(arg_params["bn0_gamma"].asnumpy())
                                       / np.sqrt(aux_params["bn0_moving_var"].asnumpy() + 1e-3))
    majorant.set_params(abs_args, abs_aux)
    majorant.forward(mx.io.DataBatch([mx.nd.array(np.abs(x))]), is_train=False)
    magnitude = majorant.get_outputs()[0].asnumpy().astype(np.float64)
    bound = 12 * 2.0 ** -8 * magnitude * (1 + 2.0 ** -8) ** 12
    error = np.abs(got - expected)
    assert np.all(error <= bound), float((error / bound).max())
    assert error.max() > 0  # it did run in bfloat16


def test_training_the_converted_graph_keeps_float32_weights_and_learns():
    """``convert_symbol`` without ``cast_optional_params`` keeps the parameters float32 (cast to bfloat16 on each
    forward, their gradients cast back), so the optimizer updates float32 weights, as MXNet's AMP does; a
    separable toy task is learned through the bfloat16 kernels and their gradients."""
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(3, 3), num_filter=8, pad=(1, 1), name="c0")
    bn = mx.sym.BatchNorm(conv, name="bn0")
    relu = mx.sym.Activation(bn, act_type="relu")
    pool = mx.sym.Pooling(relu, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(pool, num_hidden=4, name="fc"), name="softmax")
    converted = mx.contrib.amp.convert_symbol(net, target_dtype="bfloat16")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    y = (x[:, 0, 0, 0] > 0).astype(np.float32) + 2 * (x[:, 1, 0, 0] > 0)
    batches = mx.io.NDArrayIter(x, y, batch_size=8)
    module = mx.mod.Module(converted, context=mx.cpu())
    mx.random.seed(0)
    module.fit(batches, num_epoch=8, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
               initializer=mx.init.Xavier(), eval_metric="acc")
    assert dict(module.score(batches, "acc"))["accuracy"] >= 0.9
    args, _ = module.get_params()
    assert all(np.dtype(value.dtype) == np.float32 for value in args.values())


@pytest.mark.parametrize("cast_optional_params", [False, True])
def test_convert_hybrid_block_runs_the_converted_graph(tmp_path, cast_optional_params):
    """A hybridized Gluon block converted to a SymbolBlock computes what a Module of the converted exported model
    computes, bit for bit; the weights take the converted graph's dtypes."""
    from mxkit.gluon import nn

    block = nn.HybridSequential()
    block.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(), nn.Dense(5))
    block.initialize(mx.init.Xavier())
    block.hybridize()
    x = mx.nd.array(np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))
    block(x).wait_to_read()
    converted = mx.contrib.amp.convert_hybrid_block(block, target_dtype="bfloat16",
                                                    cast_optional_params=cast_optional_params)
    weights = [p for p in converted.collect_params().values() if p.name.endswith("weight")]
    assert {np.dtype(p.dtype).name for p in weights} == {"bfloat16" if cast_optional_params else "float32"}
    got = converted(x).asnumpy()
    assert got.dtype == np.float32
    block.export(str(tmp_path / "net"))
    sym, args, aux = mx.model.load_checkpoint(str(tmp_path / "net"), 0)
    sym, args, aux = mx.contrib.amp.convert_model(sym, args, aux, target_dtype="bfloat16",
                                                  cast_optional_params=cast_optional_params)
    module = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
    module.bind(data_shapes=[("data", x.shape)], for_training=False)
    module.set_params(args, aux)
    module.forward(mx.io.DataBatch([x]), is_train=False)
    assert np.array_equal(got, module.get_outputs()[0].asnumpy())
