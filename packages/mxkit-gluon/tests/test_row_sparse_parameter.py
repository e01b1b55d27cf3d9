"""Row-sparse Parameters (``stype='row_sparse'``) as MXNet 1.9.1 has them: each context holds a
RowSparseNDArray, the Trainer's store holds and trains the whole value, and
``row_sparse_data`` pulls the rows a batch uses. Trained values are checked against a numpy
replay of SGD on the rows each device looked up."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, Parameter, ParameterDict, Trainer
from mxkit.gluon.trainer import SparseWeightStoreError

ROWS, COLS = 6, 3
CTXS = [mx.cpu(0), mx.cpu(1)]


def _start(grad_stype="row_sparse", lr=0.5, **trainer_kwargs):
    param = Parameter("w", shape=(ROWS, COLS), stype="row_sparse", grad_stype=grad_stype)
    param.initialize(ctx=CTXS)
    start = np.random.RandomState(0).uniform(-1, 1, (ROWS, COLS)).astype(np.float32)
    param.set_data(mx.nd.array(start))
    trainer = Trainer([param], "sgd", {"learning_rate": lr}, **trainer_kwargs)
    return param, trainer, start


def _embedding_step(param, trainer, ids_per_ctx, coef):
    """Each device looks up its ids in the rows it pulled; loss = sum(lookup * coef)."""
    with mx.autograd.record():
        losses = []
        for ctx, ids in zip(CTXS, ids_per_ctx):
            rows = mx.nd.array(ids, ctx=ctx)
            weight = param.row_sparse_data(rows)
            lookup = mx.nd.Embedding(rows, weight, input_dim=ROWS, output_dim=COLS, sparse_grad=True)
            losses.append((lookup * mx.nd.array(coef, ctx=ctx)).sum())
    for loss in losses:
        loss.backward()
    trainer.step(1)


def _expected_after(start, ids_per_ctx, coef, lr):
    want = start.copy()
    for ids in ids_per_ctx:
        for row in ids:  # a row looked up k times gets k times the gradient
            want[row] -= lr * coef
    return want


def test_each_context_holds_a_row_sparse_array_of_every_row_until_rows_are_pulled():
    param, trainer, start = _start()
    with pytest.raises(GluonError, match="read it with row_sparse_data"):
        param.data(CTXS[0])
    arrays = param._arrays()
    assert [a.stype for a in arrays] == ["row_sparse", "row_sparse"]
    assert [a.context for a in arrays] == CTXS
    np.testing.assert_array_equal(arrays[1].asnumpy(), start)
    picked = param.row_sparse_data(mx.nd.array([4, 1, 4], ctx=CTXS[1]))
    # the array of that context now holds just those rows (sorted, once each), as MXNet's pull leaves it
    assert picked is param._arrays()[1] and picked.context == CTXS[1]
    assert picked.indices.asnumpy().tolist() == [1, 4]
    want = np.zeros_like(start)
    want[[1, 4]] = start[[1, 4]]
    np.testing.assert_array_equal(picked.asnumpy(), want)
    np.testing.assert_array_equal(param._arrays()[0].asnumpy(), start)  # the other context is untouched
    assert trainer._update_on_kvstore is True


@pytest.mark.parametrize("grad_stype", ["row_sparse", "default"])
def test_training_updates_the_rows_each_device_used_in_the_store(grad_stype):
    lr, coef = 0.5, np.array([1.0, -2.0, 0.5], np.float32)
    param, trainer, start = _start(grad_stype=grad_stype, lr=lr)
    ids = [[0, 2, 2], [2, 5]]
    _embedding_step(param, trainer, ids, coef)
    want = _expected_after(start, ids, coef, lr)
    # the devices hold what they pulled before the step: the store has the update
    stale = param._arrays()[0]
    assert stale.indices.asnumpy().tolist() == [0, 2]
    np.testing.assert_array_equal(stale.asnumpy()[[0, 2]], start[[0, 2]])
    every_row = mx.nd.arange(0, ROWS)
    for array in param.list_row_sparse_data(every_row):
        np.testing.assert_allclose(array.asnumpy(), want, rtol=1e-6, atol=1e-6)
    ids2 = [[5], [1, 1]]
    _embedding_step(param, trainer, ids2, coef)
    np.testing.assert_allclose(param.row_sparse_data(every_row).asnumpy(), _expected_after(want, ids2, coef, lr),
                               rtol=1e-6, atol=1e-6)


def test_save_writes_every_row_from_the_store_and_loading_sets_the_store_anew(tmp_path):
    lr, coef = 0.5, np.array([1.0, 1.0, 1.0], np.float32)
    param, trainer, start = _start(lr=lr)
    ids = [[3], [3, 0]]
    _embedding_step(param, trainer, ids, coef)
    trained = _expected_after(start, ids, coef, lr)
    params = ParameterDict()
    params._params["w"] = param
    params.save(str(tmp_path / "w.params"))
    saved = mx.nd.load(str(tmp_path / "w.params"))["w"]
    assert saved.stype == "row_sparse"
    np.testing.assert_allclose(saved.asnumpy(), trained, rtol=1e-6, atol=1e-6)
    # a new value replaces the store's: the next pull reads it, the next step trains it
    param.set_data(mx.nd.array(start))
    np.testing.assert_array_equal(param.row_sparse_data(mx.nd.arange(0, ROWS)).asnumpy(), start)
    params.load(str(tmp_path / "w.params"))
    np.testing.assert_allclose(param.row_sparse_data(mx.nd.arange(0, ROWS)).asnumpy(), trained, rtol=1e-6,
                               atol=1e-6)
    _embedding_step(param, trainer, ids, coef)
    np.testing.assert_allclose(param.row_sparse_data(mx.nd.arange(0, ROWS)).asnumpy(),
                               _expected_after(trained, ids, coef, lr), rtol=1e-6, atol=1e-6)


def test_resetting_the_store_or_the_contexts_keeps_rows_no_device_holds():
    lr, coef = 0.5, np.array([2.0, 0.0, -1.0], np.float32)
    param, trainer, start = _start(lr=lr)
    ids = [[1], [4]]
    _embedding_step(param, trainer, ids, coef)
    trained = _expected_after(start, ids, coef, lr)
    param.row_sparse_data(mx.nd.array([0], ctx=CTXS[0]))  # devices now hold one row each
    param.row_sparse_data(mx.nd.array([2], ctx=CTXS[1]))
    trainer._reset_kvstore()  # what loading a file does: the new store starts from the arrays
    np.testing.assert_allclose(param.row_sparse_data(mx.nd.arange(0, ROWS)).asnumpy(), trained, rtol=1e-6,
                               atol=1e-6)
    param.row_sparse_data(mx.nd.array([5], ctx=CTXS[0]))
    param.reset_ctx([mx.cpu(2)])
    trainer._reset_kvstore()
    np.testing.assert_allclose(param.row_sparse_data(mx.nd.arange(0, ROWS, ctx=mx.cpu(2))).asnumpy(), trained,
                               rtol=1e-6, atol=1e-6)


def test_a_parameter_without_a_trainer_saves_its_initial_value(tmp_path):
    param = Parameter("w", shape=(ROWS, COLS), stype="row_sparse")
    param.initialize(mx.init.Constant(0.25), ctx=CTXS)
    np.testing.assert_array_equal(param._reduce().asnumpy(), np.full((ROWS, COLS), 0.25, np.float32))


def test_misuse_fails_clearly():
    param, _, _ = _start()
    with pytest.raises(GluonError, match="row_id must be an NDArray"):
        param.row_sparse_data([0, 1])
    with pytest.raises(GluonError, match="already has a Trainer"):
        Trainer([param], "sgd")
    with pytest.raises(GluonError, match="was not initialized on cpu\\(3\\)"):
        param.row_sparse_data(mx.nd.array([0], ctx=mx.cpu(3)))
    lonely = Parameter("v", shape=(ROWS, COLS), stype="row_sparse")
    lonely.initialize()
    with pytest.raises(GluonError, match="no Trainer was created with it"):
        lonely.list_row_sparse_data(mx.nd.array([0]))
    for kwargs, match in (({"update_on_kvstore": False}, "update_on_kvstore=False"),
                          ({"kvstore": None}, "kvstore=None")):
        refused = Parameter("u", shape=(ROWS, COLS), stype="row_sparse")
        refused.initialize()
        Trainer([refused], "sgd", **kwargs)
        with pytest.raises(SparseWeightStoreError, match=match):  # reading rows makes the store
            refused.row_sparse_data(mx.nd.array([0]))
