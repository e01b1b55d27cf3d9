"""Python custom operators (``mx.operator``) in graphs: a Module trained through the MXNet docs'
custom softmax, an operator with two inputs, two outputs and an auxiliary state under grad_req
write and add, and MXNet's symbol JSON, all against MXNet 1.9.1 (fixtures/custom/make_custom_fixtures.py);
plus shape inference through the property, the loss-layer head gradient, and clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mxkit import mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "custom")
sys.path.insert(0, HERE)

import custom_op_defs  # noqa: E402

custom_op_defs.define(mx)
FIXTURES = np.load(os.path.join(HERE, "custom_ops.npz"), allow_pickle=False)


def fixture(prefix):
    return {k[len(prefix) + 1:]: FIXTURES[k] for k in FIXTURES.files if k.startswith(prefix + "/")}


def test_module_training_through_the_custom_softmax_matches_mxnet():
    train = fixture("train")
    it = mx.io.NDArrayIter(train["data"], train["label"], batch_size=10, label_name="softmax_label")
    mod = mx.mod.Module(custom_op_defs.mlp(mx), data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    initial = {k.split("/", 1)[1]: mx.nd.array(v) for k, v in train.items() if k.startswith("initial/")}
    mod.init_params(arg_params=initial)
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5, "momentum": 0.9})
    for batch in it:
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), train["last_output"], rtol=1e-4, atol=1e-5)
    arg_params, _ = mod.get_params()
    for name, value in arg_params.items():
        np.testing.assert_allclose(value.asnumpy(), train[f"final/{name}"], rtol=1e-4, atol=1e-5, err_msg=name)
        assert not np.allclose(train[f"final/{name}"], train[f"initial/{name}"])  # training moved it


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_two_inputs_two_outputs_and_an_aux_state_match_mxnet(grad_req):
    ref = fixture(f"pair_{grad_req}")
    sym = custom_op_defs.pair(mx)
    assert sym.list_arguments() == ["a", "b"]
    assert sym.list_outputs() == ["pair_product", "pair_difference"]
    assert sym.list_auxiliary_states() == ["pair_state"]
    exe = sym.simple_bind(mx.cpu(), a=(3, 4), b=(3, 4), grad_req=grad_req)
    exe.arg_dict["a"][:] = ref["a"]
    exe.arg_dict["b"][:] = ref["b"]
    exe.aux_dict["pair_state"][:] = np.arange(4, dtype=np.float32)
    for name in ("a", "b"):
        exe.grad_dict[name][:] = 0
    for _ in range(2):
        outs = exe.forward(is_train=True)
        exe.backward([mx.nd.array(ref["head0"]), mx.nd.array(ref["head1"])])
    np.testing.assert_allclose(outs[0].asnumpy(), ref["out0"], rtol=1e-5)
    np.testing.assert_allclose(outs[1].asnumpy(), ref["out1"], rtol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), ref["grad_a"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), ref["grad_b"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["pair_state"].asnumpy(), ref["state"])
    predict = exe.forward(is_train=False)  # prediction leaves the state alone
    np.testing.assert_allclose(predict[0].asnumpy(), ref["predict_out0"], rtol=1e-5)
    np.testing.assert_allclose(exe.aux_dict["pair_state"].asnumpy(), ref["state"])


def test_imperative_autograd_matches_the_executor():
    ref = fixture("pair_write")
    a, b = mx.nd.array(ref["a"]), mx.nd.array(ref["b"])
    state = mx.nd.array(np.arange(4, dtype=np.float32))
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        product, difference = mx.nd.Custom(a, b, state, op_type="scaled_pair", scale=2.5)
    mx.autograd.backward([product, difference], [mx.nd.array(ref["head0"]), mx.nd.array(ref["head1"])])
    expected_a = ref["head0"] * ref["b"] * 2.5 + ref["head1"]
    expected_b = ref["head0"] * ref["a"] * 2.5 - ref["head1"]
    np.testing.assert_allclose(a.grad.asnumpy(), expected_a, rtol=1e-5)
    np.testing.assert_allclose(b.grad.asnumpy(), expected_b, rtol=1e-5)
    np.testing.assert_allclose(state.asnumpy(), np.arange(4) + 1)  # a recorded call trains
    np.testing.assert_allclose(product.asnumpy(), ref["a"] * ref["b"] * 2.5 + np.arange(4) + 1, rtol=1e-5)


def test_loss_layer_supplies_its_own_head_gradient_imperatively():
    x = mx.nd.array(np.random.default_rng(0).uniform(-1, 1, (4, 3)))
    label = mx.nd.array([0, 2, 1, 2])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, label, op_type="softmax")
    y.backward()
    probs = np.exp(x.asnumpy()) / np.exp(x.asnumpy()).sum(axis=1, keepdims=True)
    probs[np.arange(4), [0, 2, 1, 2]] -= 1
    np.testing.assert_allclose(x.grad.asnumpy(), probs, rtol=1e-5, atol=1e-6)


def test_shape_inference_goes_through_the_property():
    sym = custom_op_defs.mlp(mx)
    arg_shapes, out_shapes, _ = sym.infer_shape(data=(10, 6))
    shapes = dict(zip(sym.list_arguments(), arg_shapes))
    assert shapes["softmax_label"] == (10,)  # from SoftmaxProp.infer_shape
    assert shapes["fc2_weight"] == (3, 8)
    assert out_shapes == [(10, 3)]
    _, _, aux = custom_op_defs.pair(mx).infer_shape(a=(3, 4))
    assert aux == [(4,)]
    arg_types, out_types, _ = custom_op_defs.pair(mx).infer_type(a=np.float32)
    assert arg_types == [np.float32, np.float32] and out_types == [np.float32, np.float32]


@pytest.mark.parametrize("name", ["mlp.json", "pair.json"])
def test_mxnet_json_loads_runs_and_round_trips(name):
    loaded = mx.sym.load(os.path.join(HERE, name))
    built = custom_op_defs.mlp(mx) if name == "mlp.json" else custom_op_defs.pair(mx)
    assert loaded.list_arguments() == built.list_arguments()
    assert loaded.list_auxiliary_states() == built.list_auxiliary_states()
    again = mx.sym.load_json(loaded.tojson())
    assert again.tojson() == loaded.tojson()
    node = [n for n in again.get_internals()._outputs if n.node.op is not None][-1].node
    assert node.attrs["op_type"] in ("softmax", "scaled_pair")
    if name == "pair.json":
        assert node.attrs["scale"] == "2.5"
        ref = fixture("pair_write")
        exe = loaded.bind(mx.cpu(), {"a": mx.nd.array(ref["a"]), "b": mx.nd.array(ref["b"])},
                          aux_states=[mx.nd.array(np.arange(4, dtype=np.float32))])
        out = exe.forward(is_train=False)[0].asnumpy()
        np.testing.assert_allclose(out, ref["a"] * ref["b"] * 2.5 + np.arange(4), rtol=1e-5)


def test_unregistered_op_type_in_json_names_it_and_the_registered_ones():
    text = open(os.path.join(HERE, "pair.json")).read().replace("scaled_pair", "never_registered")
    with pytest.raises(mx.MXNetError) as info:
        mx.sym.load_json(text)
    message = str(info.value)
    assert "never_registered" in message and "'scaled_pair'" in message and "'softmax'" in message


def test_unregistered_op_type_when_building():
    with pytest.raises(mx.MXNetError, match="'nope' is not registered"):
        mx.sym.Custom(mx.sym.Variable("x"), op_type="nope")
    with pytest.raises(mx.MXNetError, match="'nope' is not registered"):
        mx.nd.Custom(mx.nd.ones((2, 2)), op_type="nope")
    with pytest.raises(mx.MXNetError, match="needs parameter 'op_type'"):
        mx.nd.Custom(mx.nd.ones((2, 2)))


@mx.operator.register("wrong_shape_count")
class WrongShapeCountProp(mx.operator.CustomOpProp):
    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0], in_shape[0]], []  # two output shapes for one output


@mx.operator.register("failing_forward")
class FailingForwardProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        class Failing(mx.operator.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                raise RuntimeError("the user's forward broke")

        return Failing()


def test_infer_shape_returning_the_wrong_number_of_shapes():
    with pytest.raises(mx.MXNetError) as info:
        mx.nd.Custom(mx.nd.ones((2, 2)), op_type="wrong_shape_count")
    assert "'wrong_shape_count'" in str(info.value) and "2 entries" in str(info.value)
    with pytest.raises(mx.MXNetError, match="wrong_shape_count"):
        mx.sym.Custom(mx.sym.Variable("x"), op_type="wrong_shape_count").infer_shape(x=(2, 2))


def test_forward_error_surfaces_at_the_next_sync_point_naming_the_op_type():
    out = mx.nd.Custom(mx.nd.ones((2, 2)), op_type="failing_forward")  # returns: the error is deferred
    with pytest.raises(mx.MXNetError) as info:
        out.asnumpy()
    assert "failing_forward" in str(info.value) and "the user's forward broke" in str(info.value)
    exe = mx.sym.Custom(mx.sym.Variable("x"), op_type="failing_forward").simple_bind(mx.cpu(), x=(2, 2))
    exe.forward()
    with pytest.raises(mx.MXNetError, match="failing_forward"):
        exe.outputs[0].asnumpy()
    assert mx.nd.ones((2,)).asnumpy().sum() == 2  # the engine goes on


DEADLOCK_SCRIPT = textwrap.dedent("""
    import numpy as np
    from mxkit import mx

    @mx.operator.register("host_round_trip")
    class HostProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            class Host(mx.operator.CustomOp):
                def forward(self, is_train, req, in_data, out_data, aux):
                    x = in_data[0].asnumpy()  # a sync point inside the engine operation
                    y = mx.nd.array(x) * 2 + in_data[0]  # and operations pushed from it
                    y.wait_to_read()
                    self.assign(out_data[0], req[0], y)

                def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
                    self.assign(in_grad[0], req[0], out_grad[0].asnumpy() * 3)
            return Host()

    x = mx.nd.ones((64, 64))
    outs = [mx.nd.Custom(x + i, op_type="host_round_trip") for i in range(40)]
    total = sum(float(o.asnumpy()[0, 0]) for o in outs)
    assert total == sum(3 * (1 + i) for i in range(40)), total
    exe = mx.sym.Custom(mx.sym.Variable("x"), op_type="host_round_trip").simple_bind(mx.cpu(), x=(8, 8))
    for _ in range(20):
        exe.forward(is_train=True, x=mx.nd.ones((8, 8)))
        exe.backward(mx.nd.ones((8, 8)))
    assert float(exe.grad_dict["x"].asnumpy()[0, 0]) == 3.0
    print("ok")
""")


# the in-flight limiter makes a thread that pushes large outputs wait for the oldest ones; on a custom
# operator's thread the oldest may be the running operator's own output (a bound of 0 makes it so)
BIG_OUTPUTS_SCRIPT = textwrap.dedent("""
    from mxkit import mx
    from mxkit.ndarray import invoke

    invoke.in_flight.limit = 0

    @mx.operator.register("many_big_outputs")
    class ManyProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            class Many(mx.operator.CustomOp):
                def forward(self, is_train, req, in_data, out_data, aux):
                    y = in_data[0]
                    for _ in range(6):
                        y = y + 1.0  # 256 KiB outputs pushed from inside the operation
                    self.assign(out_data[0], req[0], y)
            return Many()

    out = mx.nd.Custom(mx.nd.ones((256, 256)), op_type="many_big_outputs")
    assert float(out.asnumpy()[0, 0]) == 7.0
    print("ok")
""")


@pytest.mark.parametrize("script", ["sync_points", "big_outputs"])
@pytest.mark.parametrize("engine", ["threaded", "threaded_per_device", "naive"])
def test_asnumpy_inside_a_custom_op_does_not_deadlock(engine, script):
    env = dict(os.environ, MXKIT_ENGINE=engine, MXKIT_CPU_WORKERS="1")
    code = DEADLOCK_SCRIPT if script == "sync_points" else BIG_OUTPUTS_SCRIPT
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
