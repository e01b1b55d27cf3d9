"""mx.test_utils: check_numeric_gradient, check_symbolic_forward/backward, check_consistency,
simple_forward; each must pass on correct operators and fail on wrong ones."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core import hookimpl
from mxkit.core.errors import MXKitError
from mxkit.mx import test_utils as tu

CUBE_RIGHT = "_test_cube_right_gradient"
CUBE_WRONG = "_test_cube_wrong_gradient"


class CubeOperatorsPlugin:
    """A plugin adding x**3 twice: once with its gradient 3x², once with a wrong one (2x²)."""

    @hookimpl
    def mxkit_kernels(self, registry):
        from mxkit.ndarray.ops._helpers import elementwise_shape
        from mxkit.ndarray.registry import OpDef

        def cube(xp, inputs, outputs, params):
            xp.multiply(inputs[0] * inputs[0], inputs[0], out=outputs[0])

        def gradient_with(factor):
            def gradient(F, params, inputs, outputs, out_grads):
                square = F.elemwise_mul(inputs[0], inputs[0])
                return [F.elemwise_mul(out_grads[0], F("_mul_scalar", square, scalar=factor))]
            return gradient

        for name, factor in ((CUBE_RIGHT, 3.0), (CUBE_WRONG, 2.0)):
            if name not in registry:  # the hook runs again whenever kernels are reloaded
                registry.register(OpDef(name=name, infer_shape=elementwise_shape(name), kernel=cube,
                                        gradient=gradient_with(factor)))


@pytest.fixture(scope="module")
def cube_operators():
    from mxkit.core import plugins
    from mxkit.ndarray.registry import reload_kernels

    name = plugins.register_plugin(CubeOperatorsPlugin(), name="test-cube-operators")
    reload_kernels()
    yield
    plugins.unregister_plugin(name)
    reload_kernels()


def _cube(op_name):
    from mxkit.symbol.op import create

    return create(op_name, mx.sym.Variable("x"))


def test_numeric_gradient_accepts_a_right_gradient_and_catches_a_wrong_one(cube_operators):
    np.random.seed(0)
    location = [np.random.uniform(0.5, 1.5, size=(2, 3))]
    tu.check_numeric_gradient(_cube(CUBE_RIGHT), location, dtype=np.float64)
    with pytest.raises(AssertionError) as info:
        tu.check_numeric_gradient(_cube(CUBE_WRONG), location, dtype=np.float64)
    message = str(info.value)
    assert "NUMERICAL_x" in message and "BACKWARD_x" in message
    assert "Location of maximum error" in message


def test_the_wrong_gradient_is_wrong_by_a_third_as_written(cube_operators):
    # independent of the helper: the plugin's operator computes x**3 and a 2x² gradient
    from mxkit.ndarray.op_functions import call

    x = mx.nd.array([2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = call(CUBE_WRONG, (x,), {})
    y.backward()
    assert y.asnumpy()[0] == 8.0 and x.grad.asnumpy()[0] == 8.0  # 2 * 2², not 3 * 2²


def test_numeric_gradient_of_builtin_operators():
    np.random.seed(1)
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    tu.check_numeric_gradient(x * y + mx.sym.sin(x), [np.random.rand(2, 3), np.random.rand(2, 3)])
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    tu.check_numeric_gradient(fc, {"data": np.random.rand(2, 4), "fc_weight": np.random.rand(3, 4),
                                   "fc_bias": np.random.rand(3)}, numeric_eps=1e-3, rtol=1e-2, atol=1e-3)


def test_numeric_gradient_grad_nodes_and_requests(cube_operators):
    np.random.seed(2)
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    sym = x * y
    location = [np.random.rand(3), np.random.rand(3)]
    tu.check_numeric_gradient(sym, location, grad_nodes=["x"])
    tu.check_numeric_gradient(sym, location, grad_nodes={"x": "add", "y": "null"})
    # only the checked argument matters: a wrong gradient elsewhere goes unnoticed, a checked one does not
    wrong = _cube(CUBE_WRONG) * mx.sym.Variable("y")
    location = {"x": np.random.uniform(0.5, 1.5, size=3), "y": np.random.rand(3)}
    tu.check_numeric_gradient(wrong, location, grad_nodes=["y"], dtype=np.float64)
    with pytest.raises(AssertionError, match="NUMERICAL_x"):
        tu.check_numeric_gradient(wrong, location, grad_nodes=["x"], dtype=np.float64)


def test_numeric_gradient_with_aux_states():
    np.random.seed(3)
    bn = mx.sym.BatchNorm(mx.sym.Variable("data"), fix_gamma=False, name="bn")
    location = {"data": np.random.rand(4, 3), "bn_gamma": np.random.rand(3) + 0.5, "bn_beta": np.random.rand(3)}
    aux = {"bn_moving_mean": np.zeros(3), "bn_moving_var": np.ones(3)}
    tu.check_numeric_gradient(bn, location, aux_states=aux, numeric_eps=1e-3, rtol=5e-2, atol=5e-3,
                              dtype=np.float64)


def test_numeric_gradient_bad_inputs():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    with pytest.raises(MXKitError, match=r"\(x\) do not match the symbol's \(x, y\)"):
        tu.check_numeric_gradient(x * y, {"x": np.ones(2)})
    with pytest.raises(MXKitError, match=r"1 arguments given for the symbol's 2 \(x, y\)"):
        tu.check_numeric_gradient(x * y, [np.ones(2)])
    with pytest.raises(MXKitError, match="grad_nodes names z, which are not arguments"):
        tu.check_numeric_gradient(x * y, [np.ones(2), np.ones(2)], grad_nodes=["z"])
    with pytest.raises(MXKitError, match=r"dtype=<class 'numpy\.int32'> is not supported"):
        tu.check_numeric_gradient(x * y, [np.ones(2), np.ones(2)], dtype=np.int32)
    with pytest.raises(MXKitError, match="needs a symbol with one output, this one has 2"):
        tu.check_numeric_gradient(mx.sym.Group([x * y, x + y]), [np.ones(2), np.ones(2)])
    with pytest.raises(MXKitError, match="numeric_eps=1e-07 is too small for float32"):
        tu.check_numeric_gradient(x * y, [np.ones(2), np.ones(2)], numeric_eps=1e-7)


def test_check_symbolic_forward():
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0]])
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    outputs = tu.check_symbolic_forward(x * y - x, [a, b], [np.array([[2.0, -4.0]])])
    assert outputs[0].shape == (1, 2)
    product = x * y
    name = product.list_outputs()[0]
    tu.check_symbolic_forward(product, {"x": a, "y": b}, {name: a * b})
    with pytest.raises(AssertionError) as info:
        tu.check_symbolic_forward(product, [a, b], [np.array([[3.0, -3.0]])])
    assert f"Location of maximum error: (0, 1), EXPECTED_{name}=-3.00000000, FORWARD_{name}=-2.00000000" in str(
        info.value)
    with pytest.raises(MXKitError, match=r"the expected outputs lack .*; the symbol's outputs are"):
        tu.check_symbolic_forward(product, [a, b], {"other": a})
    with pytest.raises(MXKitError, match="2 expected outputs given for the symbol's 1"):
        tu.check_symbolic_forward(x * y, [a, b], [a, b])


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_check_symbolic_backward(grad_req):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    head = np.array([1.0, 10.0, 100.0])
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    sym = x * y + mx.sym.sin(x)
    # d/dx = y + cos x, d/dy = x, times the head gradient
    expected = [head * (b + np.cos(a)), head * a]
    grads = tu.check_symbolic_backward(sym, [a, b], [head], expected, grad_req=grad_req)
    assert set(grads) == {"x", "y"}
    with pytest.raises(AssertionError, match="EXPECTED_y"):
        tu.check_symbolic_backward(sym, [a, b], [head], [expected[0], head * b], grad_req=grad_req)


def test_check_symbolic_backward_null_leaves_the_gradient_alone():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    a = np.array([1.0, 2.0])
    tu.check_symbolic_backward(x * y, [a, a], [np.ones(2)], {"x": np.zeros(2), "y": a},
                               grad_req={"x": "null", "y": "write"})


def test_grad_req_add_under_the_default_fusion_pass():
    # fused nodes used their output array as scratch: summing into a gradient array they also read
    # doubled the gradient instead of adding it to what was there
    x = mx.sym.Variable("x")
    sym = mx.sym.sin(x) * 1
    value, before = np.array([0.5, 1.0]), np.array([10.0, 20.0])
    grad = mx.nd.array(before)
    exe = sym.bind(mx.cpu(), args={"x": mx.nd.array(value)}, args_grad={"x": grad}, grad_req="add")
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((2,))])
    np.testing.assert_allclose(grad.asnumpy(), before + np.cos(value), rtol=1e-6)


def _contexts(shape, dtypes):
    contexts = [mx.cpu(0), mx.cpu(1)]
    if mx.context.num_gpus() > 0:
        contexts.append(mx.gpu(0))
    return [{"ctx": ctx, "data": shape, "type_dict": {"data": dtype}} for ctx in contexts for dtype in dtypes]


def test_check_consistency_across_contexts_and_dtypes():
    np.random.seed(4)
    data = mx.sym.Variable("data")
    net = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=4, name="fc"), act_type="tanh")
    truth = tu.check_consistency(net, _contexts((3, 5), [np.float32, np.float64]))
    assert {"fc_weight", "fc_bias", "data"} <= set(truth)
    assert all(np.dtype(v.dtype) == np.float64 for v in truth.values())  # the widest run is the reference
    tu.check_consistency(net, _contexts((3, 5), [np.float32]), grad_req="null")


def test_check_consistency_catches_a_different_run():
    np.random.seed(5)
    data = mx.sym.Variable("data")
    wrong = tu.check_consistency
    runs = [{"ctx": mx.cpu(0), "data": (2, 3)}, {"ctx": mx.cpu(1), "data": (2, 3)}]
    # two symbols that should agree but do not: the comparison must say where
    with pytest.raises(AssertionError, match=r"run 1 \(float32 on cpu\(1\)\) differs from run 0"):
        wrong([mx.sym.Activation(data, act_type="tanh", name="act"),
               mx.sym.Activation(data, act_type="softsign", name="act")], runs, grad_req="null")
    with pytest.raises(MXKitError, match="at least two entries"):
        tu.check_consistency(data * 2, runs[:1])


def test_simple_forward():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    out = tu.simple_forward(x * y, x=np.array([1.0, 2.0]), y=np.array([3.0, 4.0]))
    np.testing.assert_array_equal(out, [3.0, 8.0])
    both = tu.simple_forward(mx.sym.Group([x + y, x - y]), x=np.array([1.0]), y=np.array([3.0]))
    assert [o.tolist() for o in both] == [[4.0], [-2.0]]
