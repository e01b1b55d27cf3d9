"""A Trainer and its parameters: loading new values while the store holds the weights resets the
store (the next step starts from the loaded values), update() where the store runs the optimizer is
refused with an error MXNet code catches (AssertionError), and sparse storage is refused."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, ParameterDict, Trainer

CONTEXTS = [mx.cpu(0), mx.cpu(1)]
LR = 0.1


def _step(x, trainer):
    with mx.autograd.record():
        ys = [w + 1 for w in x.list_data()]  # d/dw = 1 on each device: the store sums 2
    for y in ys:
        y.backward()
    trainer.step(1)


@pytest.mark.parametrize("kvstore", ["local", "device"])
def test_loading_parameters_resets_a_store_that_holds_the_weights(tmp_path, kvstore):
    params = ParameterDict()
    x = params.get("x", shape=(4,))
    params.initialize(ctx=CONTEXTS, init="zeros")
    trainer = Trainer(params, "sgd", {"learning_rate": LR}, kvstore=kvstore, update_on_kvstore=True)
    assert x._trainer is trainer
    path = str(tmp_path / "zeros.params")
    params.save(path)
    _step(x, trainer)
    np.testing.assert_allclose(x.data(mx.cpu(1)).asnumpy(), np.full(4, -2 * LR), rtol=1e-6)
    params.load(path, ctx=CONTEXTS)
    assert trainer._kvstore is None and trainer._kv_initialized is False
    _step(x, trainer)  # from the loaded zeros, not from the store's -0.2
    for ctx in CONTEXTS:
        np.testing.assert_allclose(x.data(ctx).asnumpy(), np.full(4, -2 * LR), rtol=1e-6)


def test_loading_leaves_a_trainer_that_updates_locally_alone(tmp_path):
    params = ParameterDict()
    x = params.get("x", shape=(3,))
    params.initialize(ctx=CONTEXTS, init="zeros")
    trainer = Trainer(params, "sgd", {"learning_rate": LR}, kvstore="local", update_on_kvstore=False)
    path = str(tmp_path / "zeros.params")
    params.save(path)
    _step(x, trainer)
    store = trainer._kvstore
    params.load(path, ctx=CONTEXTS)
    assert trainer._kvstore is store  # it holds no weights: nothing to reset
    _step(x, trainer)
    np.testing.assert_allclose(x.data(mx.cpu(0)).asnumpy(), np.full(3, -2 * LR), rtol=1e-6)


def test_update_and_allreduce_where_the_store_runs_the_optimizer_are_assertion_errors():
    params = ParameterDict()
    x = params.get("x", shape=(2,))
    params.initialize(ctx=CONTEXTS, init="zeros")
    trainer = Trainer(params, "sgd", {"learning_rate": LR}, kvstore="device", update_on_kvstore=True)
    _step(x, trainer)
    for call in (lambda: trainer.update(1), trainer.allreduce_grads):
        with pytest.raises(AssertionError, match="update_on_kvstore=False"):
            call()
        with pytest.raises(GluonError):
            call()


@pytest.mark.parametrize("kwargs, message", [({"stype": "csr"}, "'csr' is not provided for parameters"),
                                             ({"grad_stype": "dense"}, "must be 'default' or 'row_sparse'")])
def test_unprovided_storage_is_refused_clearly(kwargs, message):
    with pytest.raises(mx.gluon.StorageTypeError, match=message):
        mx.gluon.Parameter("w", shape=(3,), **kwargs)
    assert issubclass(mx.gluon.StorageTypeError, AssertionError)  # what MXNet raises there


def test_set_trainer_links_and_unlinks():
    x = mx.gluon.Parameter("x", shape=(2,))
    x.initialize(init="zeros")
    trainer = Trainer([x], "sgd")
    assert x._trainer is trainer
    x._set_trainer(None)
    assert x._trainer is None
