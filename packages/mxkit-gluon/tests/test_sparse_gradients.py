"""Row-sparse gradients in Gluon: ``Embedding(sparse_grad=True)``, ``grad_stype='row_sparse'``
Parameters, and the Trainer's lazy updates, checked against a numpy replay of MXNet 1.9.1's
update rules."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import contrib, nn

BATCHES = [[1, 3, 3], [0, 3], [5, 1, 1, 1]]


def _embedding(sparse_grad, rows=7, cols=3):
    layer = nn.Embedding(rows, cols, sparse_grad=sparse_grad)
    layer.initialize(mx.init.Uniform(0.5))
    return layer


def _train(layer, optimizer, params, batches):
    trainer = mx.gluon.Trainer(layer.collect_params(), optimizer, params)
    for batch in batches:
        x = mx.nd.array(batch)
        with mx.autograd.record():
            loss = (layer(x) * layer(x)).sum()
        loss.backward()
        trainer.step(len(batch))
    return layer.weight.data().asnumpy()


def _lazy_sgd_replay(weight, batches, lr, wd, momentum):
    """MXNet's lazy sgd(_mom)_update: only rows of the gradient change (weight and momentum)."""
    weight = weight.astype(np.float64).copy()
    mom = np.zeros_like(weight)
    for batch in batches:
        grad = np.zeros_like(weight)
        for row in batch:
            grad[row] += 2 * weight[row]  # d/dw of sum(w[row]^2), once per lookup
        grad /= len(batch)
        rows = np.unique(batch)
        step = grad[rows] + wd * weight[rows]
        mom[rows] = momentum * mom[rows] - lr * step
        weight[rows] += mom[rows]
    return weight


def test_embedding_sparse_grad_is_row_sparse_with_the_looked_up_rows():
    layer = _embedding(True)
    assert layer.weight.grad_stype == "row_sparse"
    assert layer.weight.grad().stype == "row_sparse"
    x = mx.nd.array([4, 1, 4])
    with mx.autograd.record():
        y = layer(x)
    y.backward()
    grad = layer.weight.grad()
    assert grad.stype == "row_sparse"
    assert sorted(grad.indices.asnumpy().tolist()) == [1, 4]
    want = np.zeros((7, 3), np.float32)
    for row in (4, 1, 4):
        want[row] += 1
    np.testing.assert_array_equal(grad.asnumpy(), want)


@pytest.mark.parametrize("momentum,wd", [(0.0, 0.0), (0.9, 0.1)])
def test_lazy_sgd_on_embedding_equals_numpy_replay(momentum, wd):
    layer = _embedding(True)
    start = layer.weight.data().asnumpy()
    got = _train(layer, "sgd", {"learning_rate": 0.1, "momentum": momentum, "wd": wd}, BATCHES)
    want = _lazy_sgd_replay(start, BATCHES, 0.1, wd, momentum)
    # float32 arithmetic against a float64 replay over three steps of O(1) values
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    untouched = [r for r in range(7) if r not in {r for b in BATCHES for r in b}]
    np.testing.assert_array_equal(got[untouched], start[untouched])


def test_sparse_and_dense_gradients_agree_when_every_row_is_touched():
    batches = [[0, 1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1, 0, 0]]
    results = []
    for sparse_grad in (True, False):
        mx.random.seed(3)
        layer = _embedding(sparse_grad)
        results.append(_train(layer, "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.01}, batches))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-7)


def test_zero_grad_empties_a_row_sparse_gradient_and_add_restarts_from_zero():
    layer = _embedding(True)
    layer.weight.grad_req = "add"
    for batch in ([2, 2], [5]):
        with mx.autograd.record():
            y = layer(mx.nd.array(batch))
        y.backward()
    assert sorted(layer.weight.grad().indices.asnumpy().tolist()) == [2, 5]
    layer.weight.zero_grad()
    assert layer.weight.grad().stype == "row_sparse"
    assert layer.weight.grad().indices.shape[0] == 0
    with mx.autograd.record():
        y = layer(mx.nd.array([3]))
    y.backward()
    want = np.zeros((7, 3), np.float32)
    want[3] = 1
    np.testing.assert_array_equal(layer.weight.grad().asnumpy(), want)


def test_parameter_grad_stype_row_sparse_on_two_contexts_sums_rows():
    param = mx.gluon.Parameter("w", shape=(5, 2), grad_stype="row_sparse")
    param.initialize(mx.init.One(), ctx=[mx.cpu(0), mx.cpu(1)])
    assert [g.stype for g in param.list_grad()] == ["row_sparse", "row_sparse"]
    trainer = mx.gluon.Trainer([param], "sgd", {"learning_rate": 1.0}, kvstore=None)
    for ctx, row in ((mx.cpu(0), 1), (mx.cpu(1), 3)):
        with mx.autograd.record():
            y = mx.nd.Embedding(mx.nd.array([row], ctx=ctx), param.data(ctx), input_dim=5, output_dim=2)
        y.backward()
    trainer.step(1)
    want = np.ones((5, 2), np.float32)
    want[[1, 3]] -= 1.0
    for array in param.list_data():
        np.testing.assert_array_equal(array.asnumpy(), want)


def test_contrib_sparse_embedding_has_a_row_sparse_gradient():
    layer = contrib.nn.SparseEmbedding(6, 3)
    layer.initialize()
    with mx.autograd.record():
        y = layer(mx.nd.array([4, 1]))
    y.backward()
    assert layer.weight.grad().stype == "row_sparse"
    assert sorted(layer.weight.grad().indices.asnumpy().tolist()) == [1, 4]


@pytest.mark.parametrize("even_split,ctxs", [(False, 2), (True, 1), (True, 3)])
def test_split_and_load_keeps_csr_batches_csr(even_split, ctxs):
    dense = np.zeros((6, 5), np.float32)
    dense[1, 2], dense[4, 0], dense[5, 4] = 3, 1, 2
    contexts = [mx.cpu(i) for i in range(ctxs)]
    parts = mx.gluon.utils.split_and_load(mx.nd.array(dense).tostype("csr"), contexts, even_split=even_split)
    assert [p.stype for p in parts] == ["csr"] * ctxs
    assert [p.context for p in parts] == contexts
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), dense)
    np.testing.assert_array_equal(parts[0].asnumpy(), np.array_split(dense, ctxs)[0])


def test_split_data_refuses_a_csr_split_across_columns():
    from mxkit.core.errors import ShapeError

    csr = mx.nd.array(np.eye(4, dtype=np.float32)).tostype("csr")
    with pytest.raises(ShapeError, match="only along axis 0"):
        mx.gluon.utils.split_data(csr, 2, batch_axis=1)


def test_symbol_block_refuses_a_row_sparse_parameter_variable():
    from mxkit.gluon.parameter import StorageTypeError

    data = mx.sym.var("data")
    out = mx.sym.broadcast_add(mx.sym.dot(data, mx.sym.var("weight", stype="row_sparse")), mx.sym.var("bias"))
    with pytest.raises(StorageTypeError, match="'weight' because its storage type is 'row_sparse'"):
        mx.gluon.SymbolBlock(out, data)
    dense_out = mx.sym.broadcast_add(mx.sym.dot(data, mx.sym.var("weight")), mx.sym.var("bias"))
    assert sorted(mx.gluon.SymbolBlock(dense_out, data).collect_params().keys()) == ["bias", "weight"]


class _Linear(mx.gluon.HybridBlock):
    def __init__(self, units):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(units, units))

    def hybrid_forward(self, F, x, w):
        return F.dot(x, w)


@pytest.mark.parametrize("hybridize", [False, True])
def test_block_takes_a_csr_batch_and_matches_its_dense_form(hybridize):
    rng = np.random.RandomState(1)
    dense = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    dense[dense < 0] = 0
    block = _Linear(4)
    block.initialize(mx.init.Uniform(0.5))
    if hybridize:
        block.hybridize()
    w = block.w.data().asnumpy()
    with mx.autograd.record():
        out = block(mx.nd.array(dense).tostype("csr"))
    out.backward()
    np.testing.assert_allclose(out.asnumpy(), dense @ w, rtol=1e-5, atol=1e-6)
    # d sum(x @ w) / dw = x^T @ ones
    np.testing.assert_allclose(block.w.grad().asnumpy(), dense.T @ np.ones((3, 4), np.float32), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("kvstore", ["device", "local"])
@pytest.mark.parametrize("update_on_kvstore", [False, True])
def test_row_sparse_gradients_reduce_through_the_store(kvstore, update_on_kvstore):
    contexts = [mx.cpu(0), mx.cpu(1)]
    layer = nn.Embedding(6, 2, sparse_grad=True)
    layer.initialize(mx.init.One(), ctx=contexts)
    trainer = mx.gluon.Trainer(layer.collect_params(), "sgd", {"learning_rate": 0.5}, kvstore=kvstore,
                               update_on_kvstore=update_on_kvstore)
    batches = [[1, 1], [3]]
    with mx.autograd.record():
        outs = [layer(mx.nd.array(b, ctx=ctx)) for b, ctx in zip(batches, contexts)]
    for out in outs:
        out.backward()
    trainer.step(1)
    assert trainer._kvstore is not None and trainer._update_on_kvstore is update_on_kvstore
    want = np.ones((6, 2), np.float32)
    want[1] -= 0.5 * 2  # looked up twice on the first device
    want[3] -= 0.5 * 1
    for ctx in contexts:
        np.testing.assert_array_equal(layer.weight.data(ctx).asnumpy(), want)
    if not update_on_kvstore:
        assert [sorted(g.indices.asnumpy().tolist()) for g in layer.weight.list_grad()] == [[1, 3], [1, 3]]


def test_row_sparse_gradients_default_to_the_devices_updaters():
    layer = nn.Embedding(4, 2, sparse_grad=True)
    layer.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = mx.gluon.Trainer(layer.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="device")
    trainer._ready()
    assert trainer._update_on_kvstore is False


def test_row_sparse_weight_rows_are_differentiable_and_trained_through_a_store():
    param = mx.gluon.Parameter("w", shape=(5, 2), stype="row_sparse", grad_stype="row_sparse")
    param.initialize(mx.init.One(), ctx=[mx.cpu(0)])
    trainer = mx.gluon.Trainer([param], "sgd", {"learning_rate": 0.25})
    rows = mx.nd.array([0, 3, 3])
    with mx.autograd.record():
        # MXNet's SparseEmbedding: look the batch's rows up in the rows read for it
        picked = param.row_sparse_data(rows)
        loss = (mx.nd.Embedding(rows, picked, input_dim=5, output_dim=2) * 2).sum()
    loss.backward()
    grad = param.grad()
    assert grad.stype == "row_sparse" and sorted(grad.indices.asnumpy().tolist()) == [0, 3]
    trainer.step(1)
    assert trainer._kvstore is not None and trainer._update_on_kvstore is True  # even for one device
    want = np.ones((5, 2), np.float32)
    want[0] -= 0.25 * 2
    want[3] -= 0.25 * 4  # looked up twice
    np.testing.assert_array_equal(param.row_sparse_data(mx.nd.arange(0, 5)).asnumpy(), want)


@pytest.mark.parametrize("kwargs,match", [({"update_on_kvstore": False}, "update_on_kvstore=False"),
                                          ({"kvstore": None}, "kvstore=None")])
def test_row_sparse_weights_refuse_a_trainer_without_a_store_update(kwargs, match):
    from mxkit.gluon.trainer import SparseWeightStoreError

    param = mx.gluon.Parameter("w", shape=(5, 2), stype="row_sparse", grad_stype="row_sparse")
    param.initialize(ctx=[mx.cpu(0)])
    trainer = mx.gluon.Trainer([param], "sgd", {"learning_rate": 0.25}, **kwargs)
    with pytest.raises(SparseWeightStoreError, match=match):
        trainer.step(1)
