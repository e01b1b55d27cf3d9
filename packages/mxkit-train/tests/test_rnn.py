"""mx.rnn cells and mx.mod.BucketingModule against files written by MXNet 1.9.1
(fixtures/make_rnn_fixtures.py), plus the text iterator and the error paths."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import rnn_models  # noqa: E402


def _stored(name: str, prefix: str) -> dict:
    data = np.load(FIXTURES / name, allow_pickle=False)
    return {k[len(prefix):]: data[k] for k in data.files if k.startswith(prefix)}


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_relu"])
def test_unrolled_cell_has_mxnet_arguments_and_outputs(kind):
    stored = _stored("rnn_cells.npz", f"{kind}/")
    sym, _ = rnn_models.cell_case(mx, kind)
    assert sym.list_arguments() == str(stored["names"]).split("\n")
    args = {k[4:]: v for k, v in stored.items() if k.startswith("arg/")}
    exe = sym.bind(mx.cpu(), {n: mx.nd.array(v) for n, v in args.items()})
    outs = exe.forward()
    assert len(outs) == sum(k.startswith("out_") for k in stored)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), stored[f"out_{i}"], rtol=1e-5, atol=1e-6, err_msg=f"{kind} {i}")


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_fused_cell_matches_mxnet_and_its_unfused_cells(mode):
    stored = _stored("rnn_cells.npz", f"fused_{mode}/")
    fused, outputs, unfused_outputs, _ = rnn_models.fused_case(mx, mode)
    args = {k[4:]: v for k, v in stored.items() if k.startswith("arg/")}
    assert outputs.list_arguments() == ["data", f"{mode}_parameters"]
    fused_out = outputs.bind(mx.cpu(), {n: mx.nd.array(v) for n, v in args.items()}).forward()[0].asnumpy()
    np.testing.assert_allclose(fused_out, stored["out"], rtol=1e-5, atol=1e-6)
    # the packed vector, unpacked per gate then packed per cell, drives the unfused stack
    pieces = fused.unpack_weights({f"{mode}_parameters": mx.nd.array(args[f"{mode}_parameters"])})
    unfused = fused.unfuse()
    packed = unfused.pack_weights(pieces)
    assert sorted(packed) == sorted(n for n in unfused_outputs.list_arguments() if n != "data")
    packed["data"] = mx.nd.array(args["data"])
    unfused_out = unfused_outputs.bind(mx.cpu(), packed).forward()[0].asnumpy()
    np.testing.assert_allclose(unfused_out, fused_out, rtol=1e-5, atol=1e-6)


def test_pack_and_unpack_weights_round_trip():
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="lstm", bidirectional=True, prefix="f_")
    from mxkit.ndarray.ops.nn_rnn import rnn_param_size

    values = np.arange(rnn_param_size("lstm", 2, 4, 3, True), dtype=np.float32)
    pieces = fused.unpack_weights({"f_parameters": mx.nd.array(values)})
    assert pieces["f_l0_i2h_f_weight"].shape == (3, 4) and pieces["f_r1_h2h_o_bias"].shape == (3,)
    assert pieces["f_l0_i2h_i_weight"].asnumpy()[0, 0] == 0
    np.testing.assert_array_equal(fused.pack_weights(pieces)["f_parameters"].asnumpy(), values)
    cell = mx.rnn.LSTMCell(3, prefix="c_")
    weight = mx.nd.array(np.arange(36, dtype=np.float32).reshape(12, 3))
    split = cell.unpack_weights({"c_i2h_weight": weight, "c_i2h_bias": mx.nd.zeros(12),
                                 "c_h2h_weight": weight, "c_h2h_bias": mx.nd.zeros(12)})
    np.testing.assert_array_equal(split["c_i2h_f_weight"].asnumpy(), weight.asnumpy()[3:6])
    np.testing.assert_array_equal(cell.pack_weights(split)["c_i2h_weight"].asnumpy(), weight.asnumpy())


def test_fused_initializer_sets_forget_biases_and_fills_weights():
    fused = mx.rnn.FusedRNNCell(3, num_layers=1, mode="lstm", forget_bias=2.0, prefix="f_")
    outputs, _ = fused.unroll(4, mx.sym.var("data"), layout="TNC", merge_outputs=True)
    module = mx.mod.Module(outputs, data_names=["data"], label_names=None)
    module.bind(data_shapes=[("data", (4, 2, 5))], for_training=False)
    module.init_params(mx.init.Uniform(0.1))
    args, _ = module.get_params()
    pieces = fused.unpack_weights(args)
    np.testing.assert_array_equal(pieces["f_l0_i2h_f_bias"].asnumpy(), 2.0)
    np.testing.assert_array_equal(pieces["f_l0_i2h_i_bias"].asnumpy(), 0.0)
    weights = pieces["f_l0_i2h_i_weight"].asnumpy()
    assert np.abs(weights).max() <= 0.1 and np.abs(weights).max() > 0


def test_bidirectional_residual_and_dropout_cells_unroll():
    bi = mx.rnn.BidirectionalCell(mx.rnn.GRUCell(3, prefix="l_"), mx.rnn.GRUCell(3, prefix="r_"))
    out, states = bi.unroll(4, mx.sym.var("data"), merge_outputs=True)
    assert out.infer_shape(data=(2, 4, 5))[1] == [(2, 4, 6)] and len(states) == 2
    residual = mx.rnn.ResidualCell(mx.rnn.RNNCell(5, prefix="res_"))
    out, _ = residual.unroll(4, mx.sym.var("data"), merge_outputs=True)
    exe = out.simple_bind(mx.cpu(), data=(2, 4, 5))
    for name, array in exe.arg_dict.items():
        array[:] = 0 if name != "data" else 1
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), 1.0)  # zero weights: output = input
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(3, prefix="a_"))
    stack.add(mx.rnn.DropoutCell(0.5))
    stack.add(mx.rnn.LSTMCell(3, prefix="b_"))
    out, states = stack.unroll(4, mx.sym.var("data"), merge_outputs=False)
    assert len(out) == 4 and len(states) == 4
    with pytest.raises(MXKitError, match="cannot be stepped"):
        bi(mx.sym.var("x"), [])
    with pytest.raises(MXKitError, match="wrapped by a modifier cell"):
        residual.base_cell.begin_state()


def test_bucketing_module_trains_the_language_model_as_mxnet():
    stored = np.load(FIXTURES / "rnn_bucketing.npz", allow_pickle=False)
    initial = {k[len("initial/"):]: stored[k] for k in stored.files if k.startswith("initial/")}
    final = {k[len("final/"):]: stored[k] for k in stored.files if k.startswith("final/")}
    default = max(rnn_models.BUCKETS)
    module = mx.mod.BucketingModule(rnn_models.lm_sym_gen(mx), default_bucket_key=default, context=mx.cpu())
    shape = (rnn_models.BATCH, default)
    module.bind(data_shapes=[mx.io.DataDesc("data", shape, layout="NT")],
                label_shapes=[mx.io.DataDesc("softmax_label", shape, layout="NT")])
    module.init_params(arg_params={n: mx.nd.array(v) for n, v in initial.items()}, aux_params={})
    module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": rnn_models.LEARNING_RATE})
    metric = mx.metric.Perplexity(ignore_label=0)
    perplexities = []
    for length, data, label in rnn_models.lm_batches():
        batch = mx.io.DataBatch([mx.nd.array(data)], [mx.nd.array(label)], bucket_key=length,
                                provide_data=[mx.io.DataDesc("data", data.shape, layout="NT")],
                                provide_label=[mx.io.DataDesc("softmax_label", label.shape, layout="NT")])
        module.forward(batch, is_train=True)
        metric.reset()
        module.update_metric(metric, batch.label)
        perplexities.append(metric.get()[1])
        module.backward()
        module.update()
    assert sorted(module._buckets) == [3, 5]
    np.testing.assert_allclose(perplexities, stored["perplexity"], rtol=1e-4)
    args, _ = module.get_params()
    assert sorted(args) == sorted(final)
    for name, value in final.items():
        np.testing.assert_allclose(args[name].asnumpy(), value, rtol=1e-4, atol=1e-5, err_msg=name)
    # both buckets read one set of parameter arrays
    shared = [m._exec_group.param_arrays[0][0] for m in module._buckets.values()]
    assert shared[0] is shared[1]


def test_bucketing_module_fits_with_the_sentence_iterator(tmp_path):
    rng = np.random.default_rng(0)
    words = [[f"w{int(i)}" for i in rng.integers(0, 8, size=length)] for length in [3] * 8 + [5] * 8]
    encoded, vocab = mx.rnn.encode_sentences(words, invalid_label=0, start_label=1)
    assert vocab["\n"] == 0 and 0 not in {i for s in encoded for i in s}
    train = mx.rnn.BucketSentenceIter(encoded, batch_size=rnn_models.BATCH, buckets=[3, 5], invalid_label=0)
    batches = list(train)
    assert sorted({b.bucket_key for b in batches}) == [3, 5] and len(batches) == 4
    for b in batches:
        data, label = b.data[0].asnumpy(), b.label[0].asnumpy()
        np.testing.assert_array_equal(label[:, :-1], data[:, 1:])
        assert b.provide_data[0].shape == data.shape
    train.reset()
    module = mx.mod.BucketingModule(rnn_models.lm_sym_gen(mx), default_bucket_key=train.default_bucket_key)
    module.fit(train, eval_metric=mx.metric.Perplexity(0), optimizer="sgd",
               optimizer_params={"learning_rate": 0.1}, num_epoch=2, initializer=mx.init.Xavier())
    score = module.score(train, mx.metric.Perplexity(0))
    assert np.isfinite(score[0][1])
    module.save_checkpoint(str(tmp_path / "lm"), 2)
    assert (tmp_path / "lm-5-symbol.json").exists() and (tmp_path / "lm-0002.params").exists()
    loaded = mx.mod.BucketingModule.load(str(tmp_path / "lm"), 2, sym_gen=rnn_models.lm_sym_gen(mx),
                                         default_bucket_key=train.default_bucket_key)
    loaded.bind(train.provide_data, train.provide_label, for_training=False)
    np.testing.assert_allclose(loaded.score(train, mx.metric.Perplexity(0))[0][1], score[0][1], rtol=1e-5)
    for name, value in module.get_params()[0].items():
        np.testing.assert_array_equal(loaded.get_params()[0][name].asnumpy(), value.asnumpy())


def test_rnn_checkpoint_unpacks_fused_weights(tmp_path):
    fused = mx.rnn.FusedRNNCell(2, num_layers=1, mode="gru", prefix="g_")
    outputs, _ = fused.unroll(3, mx.sym.var("data"), layout="TNC", merge_outputs=True)
    values = mx.nd.array(np.linspace(-1, 1, 3 * 2 * (4 + 2) + 12, dtype=np.float32))
    mx.rnn.save_rnn_checkpoint(fused, str(tmp_path / "m"), 1, outputs, {"g_parameters": values}, {})
    saved = mx.nd.load(str(tmp_path / "m-0001.params"))
    assert "arg:g_l0_i2h_r_weight" in saved and "arg:g_parameters" not in saved
    _, args, _ = mx.rnn.load_rnn_checkpoint(fused, str(tmp_path / "m"), 1)
    np.testing.assert_array_equal(args["g_parameters"].asnumpy(), values.asnumpy())


def test_bucket_with_other_parameter_names_is_rejected():
    def sym_gen(length):
        prefix = "lstm_" if length == 5 else f"other{length}_"
        cell = mx.rnn.LSTMCell(3, prefix=prefix)
        out, _ = cell.unroll(length, mx.sym.var("data"), merge_outputs=True)
        return mx.sym.MakeLoss(mx.sym.sum(out)), ("data",), None

    module = mx.mod.BucketingModule(sym_gen, default_bucket_key=5)
    module.bind(data_shapes=[("data", (2, 5, 4))])
    module.init_params(mx.init.Xavier())
    batch = mx.io.DataBatch([mx.nd.ones((2, 3, 4))], bucket_key=3, provide_data=[mx.io.DataDesc("data", (2, 3, 4))])
    with pytest.raises(MXKitError, match=r"bucket key 3: sym_gen gives parameters \['other3_i2h_weight'"):
        module.forward(batch)


def test_bad_cell_and_iterator_inputs_are_rejected():
    with pytest.raises(MXKitError, match="unknown mode 'lstmm'"):
        mx.rnn.FusedRNNCell(3, mode="lstmm")
    with pytest.raises(MXKitError, match="got 2 input symbols for length=3"):
        mx.rnn.LSTMCell(3).unroll(3, [mx.sym.var("a"), mx.sym.var("b")])
    with pytest.raises(MXKitError, match="invalid layout 'NCT'"):
        mx.rnn.BucketSentenceIter([[1, 2, 3]] * 4, batch_size=2, layout="NCT")
    with pytest.raises(MXKitError, match="unknown token 'zz'"):
        mx.rnn.encode_sentences([["zz"]], vocab={"a": 1})
    with pytest.raises(MXKitError, match="needs default_bucket_key"):
        mx.mod.BucketingModule(lambda k: None)


def test_zoneout_keeps_the_new_values_in_prediction_and_old_ones_when_always_zoned():
    rng = np.random.default_rng(4)
    data = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)

    def run(cell, train: bool):
        out, _ = cell.unroll(3, mx.sym.var("data"), merge_outputs=False)
        sym = mx.sym.Group(out)
        exe = sym.simple_bind(mx.cpu(), data=(2, 3, 4))
        weights = np.random.default_rng(1)
        for name in sorted(exe.arg_dict):
            exe.arg_dict[name][:] = data if name == "data" else weights.uniform(-0.5, 0.5, exe.arg_dict[name].shape)
        return [o.asnumpy() for o in exe.forward(is_train=train)]

    plain = run(mx.rnn.GRUCell(4, prefix="z_"), train=False)
    zoned = run(mx.rnn.ZoneoutCell(mx.rnn.GRUCell(4, prefix="z_"), zoneout_outputs=0.5, zoneout_states=0.5), False)
    for a, b in zip(plain, zoned):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # in training every unit either takes its new value or keeps the previous step's
    trained = run(mx.rnn.ZoneoutCell(mx.rnn.GRUCell(4, prefix="z_"), zoneout_outputs=0.5), True)
    np.testing.assert_allclose(trained[0][(trained[0] != 0)], plain[0][(trained[0] != 0)], rtol=1e-6)
    with pytest.raises(MXKitError, match="FusedRNNCell does not support zoneout"):
        mx.rnn.ZoneoutCell(mx.rnn.FusedRNNCell(3))


def test_fused_lstm_with_dropout_trains_in_a_bucketing_module(tmp_path):
    rng = np.random.default_rng(3)
    sentences = [list(rng.integers(1, rnn_models.VOCAB, size=length)) for length in [3] * 8 + [5] * 8]
    train = mx.rnn.BucketSentenceIter(sentences, batch_size=4, buckets=[3, 5], invalid_label=0)
    cell = mx.rnn.FusedRNNCell(6, num_layers=2, dropout=0.3, mode="lstm", prefix="lstm_")

    def sym_gen(length):
        embed = mx.sym.Embedding(mx.sym.var("data"), input_dim=rnn_models.VOCAB, output_dim=5, name="embed")
        cell.reset()
        outputs, _ = cell.unroll(length, inputs=embed, merge_outputs=True, layout="NTC")
        pred = mx.sym.FullyConnected(mx.sym.Reshape(outputs, shape=(-1, 6)), num_hidden=rnn_models.VOCAB, name="pred")
        label = mx.sym.Reshape(mx.sym.var("softmax_label"), shape=(-1,))
        return mx.sym.SoftmaxOutput(pred, label, name="softmax"), ("data",), ("softmax_label",)

    module = mx.mod.BucketingModule(sym_gen, default_bucket_key=train.default_bucket_key)
    prefix = str(tmp_path / "fused")
    module.fit(train, eval_metric=mx.metric.Perplexity(0), num_epoch=1, initializer=mx.init.Xavier(),
               optimizer_params={"learning_rate": 0.1}, epoch_end_callback=mx.rnn.do_rnn_checkpoint(cell, prefix))
    saved = mx.nd.load(f"{prefix}-0001.params")
    assert "arg:lstm_l1_h2h_o_weight" in saved and "arg:lstm_parameters" not in saved
    args, _ = module.get_params()
    _, loaded, _ = mx.rnn.load_rnn_checkpoint(cell, prefix, 1)
    np.testing.assert_array_equal(loaded["lstm_parameters"].asnumpy(), args["lstm_parameters"].asnumpy())


def test_bucket_whose_parameters_change_shape_is_rejected():
    def sym_gen(length):
        data = mx.sym.var("data")
        hidden = 3 if length == 5 else 4  # a bucket-dependent layer size cannot share the weights
        out = mx.sym.FullyConnected(mx.sym.Reshape(data, shape=(0, -1)), num_hidden=hidden, name="fc")
        return mx.sym.MakeLoss(mx.sym.sum(out)), ("data",), None

    module = mx.mod.BucketingModule(sym_gen, default_bucket_key=5)
    module.bind(data_shapes=[("data", (2, 5))])
    module.init_params(mx.init.Xavier())
    batch = mx.io.DataBatch([mx.nd.ones((2, 3))], bucket_key=3, provide_data=[mx.io.DataDesc("data", (2, 3))])
    with pytest.raises(MXKitError, match=r"bucket key 3: parameter 'fc_weight' has shape \(4, 3\), but the default"):
        module.forward(batch)


def test_containers_list_the_variables_of_their_cells():
    # MXNet's SequentialRNNCell and BidirectionalCell collect their cells' parameters
    stack = mx.rnn.SequentialRNNCell()
    for i in range(3):
        lstm = mx.rnn.LSTMCell(4, prefix=f"s{i}_")
        stack.add(mx.rnn.ResidualCell(lstm) if i == 1 else lstm)
    names = sorted(stack.params._params)
    assert names == sorted(f"s{i}_{kind}" for i in range(3) for kind in ("i2h_weight", "i2h_bias", "h2h_weight",
                                                                           "h2h_bias"))
    bi = mx.rnn.ResidualCell(mx.rnn.BidirectionalCell(mx.rnn.GRUCell(3, prefix="l_"), mx.rnn.GRUCell(3, prefix="r_")))
    assert sorted(bi.params._params) == sorted(f"{side}_{kind}" for side in "lr" for kind in
                                               ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias"))
    outputs, _ = stack.unroll(2, [mx.sym.var(f"t{i}") for i in range(2)])
    assert set(names) <= set(mx.sym.Group(outputs).list_arguments())
