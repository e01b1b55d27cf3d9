"""Optimizer updates with row_sparse gradients: MXNet's lazy semantics (only the gradient's
rows move, weight decay and states included) and standard semantics (the dense update),
checked against a numpy replay of the formulas, and a Module whose row_sparse parameter
is updated lazily."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.train import optimizer as opt

SHAPE = (6, 3)
ROWS = [1, 4]


def weight_and_grad(seed=0):
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal(SHAPE).astype(np.float32)
    grad = np.zeros(SHAPE, np.float32)
    grad[ROWS] = rng.standard_normal((len(ROWS), SHAPE[1])).astype(np.float32)
    return weight, grad


def rsp(grad):
    rows = np.nonzero(np.abs(grad).sum(axis=1))[0]
    return nd.sparse.row_sparse_array((grad[rows], rows), shape=grad.shape)


def sgd_replay(weight, grad, mom, rows, lr, wd, momentum, rescale, clip):
    """MXNet's sgd(_mom)_update on ``rows`` (all rows: the dense update)."""
    weight, mom = weight.copy(), mom.copy()
    g = np.clip(rescale * grad[rows], -clip, clip) if clip else rescale * grad[rows]
    if momentum:
        mom[rows] = momentum * mom[rows] - lr * (g + wd * weight[rows])
        weight[rows] += mom[rows]
    else:
        weight[rows] = (1 - lr * wd) * weight[rows] - lr * g
    return weight, mom


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([0.0, 0.9]), st.sampled_from([0.0, 0.05]), st.sampled_from([None, 0.3]), st.booleans(),
       st.integers(0, 1000))
def test_sgd_lazy_and_standard_against_a_replay(momentum, wd, clip, lazy, seed):
    weight, grad = weight_and_grad(seed)
    kwargs = dict(learning_rate=0.1, momentum=momentum, wd=wd, rescale_grad=0.5, lazy_update=lazy)
    if clip:
        kwargs["clip_gradient"] = clip
    sgd = opt.SGD(**kwargs)
    w = nd.array(weight)
    state = sgd.create_state(0, w)
    mom = np.zeros(SHAPE, np.float32)
    expected = weight
    for _ in range(2):  # the second step shows the momentum of absent rows staying put
        sgd.update(0, w, rsp(grad), state)
        rows = ROWS if lazy else list(range(SHAPE[0]))
        expected, mom = sgd_replay(expected, grad, mom, rows, 0.1, wd, momentum, 0.5, clip)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    if momentum:
        np.testing.assert_allclose(state.asnumpy(), mom, rtol=1e-5, atol=1e-6)
    if lazy:
        absent = [r for r in range(SHAPE[0]) if r not in ROWS]
        np.testing.assert_array_equal(w.asnumpy()[absent], weight[absent])


@pytest.mark.parametrize("lazy", [True, False])
def test_adam_lazy_rows_against_a_replay(lazy):
    weight, grad = weight_and_grad(3)
    adam = opt.Adam(learning_rate=0.01, wd=0.1, lazy_update=lazy)
    w = nd.array(weight)
    mean, var = adam.create_state(0, w)
    adam.update(0, w, rsp(grad), (mean, var))
    rows = ROWS if lazy else list(range(SHAPE[0]))
    expected, m, v = weight.copy(), np.zeros(SHAPE), np.zeros(SHAPE)
    g = grad[rows] + 0.1 * weight[rows]
    m[rows] = 0.1 * g
    v[rows] = 0.001 * g * g
    lr_t = 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9)
    expected[rows] -= lr_t * m[rows] / (np.sqrt(v[rows]) + 1e-8)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean.asnumpy(), m, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(var.asnumpy(), v, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("make, lazy", [
    (lambda: opt.Ftrl(learning_rate=0.1, lamda1=0.01, wd=0.02), True),
    (lambda: opt.AdaGrad(learning_rate=0.1), True),
    (lambda: opt.RMSProp(learning_rate=0.01), False),  # MXNet has no lazy RMSProp: the dense update
])
def test_lazy_optimizers_move_only_present_rows(make, lazy):
    weight, grad = weight_and_grad(5)
    sparse_opt, dense_opt = make(), make()
    w_sparse, w_dense = nd.array(weight), nd.array(weight)
    s_sparse, s_dense = sparse_opt.create_state(0, w_sparse), dense_opt.create_state(0, w_dense)
    sparse_opt.update(0, w_sparse, rsp(grad), s_sparse)
    dense_opt.update(0, w_dense, nd.array(grad), s_dense)
    result, dense_result = w_sparse.asnumpy(), w_dense.asnumpy()
    np.testing.assert_allclose(result[ROWS], dense_result[ROWS], rtol=1e-6)  # present rows: the dense update
    absent = [r for r in range(SHAPE[0]) if r not in ROWS]
    if lazy:
        np.testing.assert_array_equal(result[absent], weight[absent])
    else:
        np.testing.assert_allclose(result, dense_result, rtol=1e-6)


def test_row_sparse_weights_keep_their_storage():
    weight, grad = weight_and_grad(7)
    w = nd.array(weight).tostype("row_sparse")
    sgd = opt.SGD(learning_rate=0.1, momentum=0.5)
    state = sgd.create_state(0, w)
    sgd.update(0, w, rsp(grad), state)
    expected, _ = sgd_replay(weight, grad, np.zeros(SHAPE, np.float32), ROWS, 0.1, 0.0, 0.5, 1.0, None)
    assert w.stype == "row_sparse"
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-6)


def test_update_operator_called_imperatively_is_lazy():
    weight, grad = weight_and_grad(9)
    w = nd.array(weight)
    nd.sgd_update(w, rsp(grad), lr=0.1, wd=0.1, lazy_update=True, out=w)
    expected, _ = sgd_replay(weight, grad, np.zeros(SHAPE), ROWS, 0.1, 0.1, 0.0, 1.0, None)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-6)
    w2 = nd.array(weight)
    nd.sgd_update(w2, rsp(grad), lr=0.1, wd=0.1, lazy_update=False, out=w2)
    dense_expected, _ = sgd_replay(weight, grad, np.zeros(SHAPE), list(range(SHAPE[0])), 0.1, 0.1, 0.0, 1.0, None)
    np.testing.assert_allclose(w2.asnumpy(), dense_expected, rtol=1e-6)


def test_module_updates_a_row_sparse_parameter_lazily():
    from mxkit import mx

    data = mx.sym.Variable("data", stype="csr")
    weight = mx.sym.Variable("w", shape=(5, 1), stype="row_sparse", init=mx.init.One())
    out = mx.sym.LinearRegressionOutput(mx.sym.sparse.dot(data, weight), mx.sym.Variable("label"))
    features = np.zeros((2, 5), np.float32)
    features[0, 1] = 1.0
    features[1, 3] = 2.0
    batch = mx.io.DataBatch([nd.sparse.csr_matrix(features)], [nd.zeros((2, 1))])
    mod = mx.mod.Module(out, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=[("data", (2, 5))], label_shapes=[("label", (2, 1))])
    mod.init_params()
    mod.init_optimizer(optimizer=opt.SGD(learning_rate=0.1, wd=0.5, momentum=0.0))
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.update()
    learned = mod.get_params()[0]["w"].asnumpy().ravel()
    # rows 0, 2, 4 saw no feature: lazily, not even weight decay moves them
    np.testing.assert_array_equal(learned[[0, 2, 4]], [1.0, 1.0, 1.0])
    # row 1: prediction 1, label 0 -> gradient 1; row 3: prediction 2 -> gradient 2 * 2
    np.testing.assert_allclose(learned[[1, 3]], [(1 - 0.05) - 0.1 * 1.0, (1 - 0.05) - 0.1 * 4.0], rtol=1e-6)
