"""The KVStore's doors: store types through the mxkit_kvstores registry, the servers'
optimizer through mxkit_optimizers (no import of mxkit-train anywhere in mxkit-kvstore),
and NDArrays through their public accessors only."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from mxkit.core.errors import KVStoreError, MissingComponentError

SOURCE = Path(__file__).parents[1] / "src" / "mxkit" / "kvstore"


def _modules():
    return sorted(SOURCE.rglob("*.py"))


def test_no_module_of_the_kvstore_imports_train():
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(name.startswith("mxkit.train") for name in names), (path.name, names)


def test_no_module_of_the_kvstore_reads_ndarray_private_fields():
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("_data", "_var", "_ctx", "_from_data"):
                assert isinstance(node.value, ast.Name) and node.value.id == "self", (path.name, node.lineno)


def test_a_server_builds_its_optimizer_through_the_registry():
    pytest.importorskip("mxkit.train")
    from mxkit.kvstore.dist.server import ParameterServer
    from mxkit.train import optimizer

    server = ParameterServer(0, num_workers=1)
    server.configure(0, "sequential", {})
    server.init([(("w", 0), np.ones(3, np.float32))])
    server.set_optimizer(0, optimizer.create("sgd", learning_rate=0.5).dumps())
    server.push_values(0, 0, [(("w", 0), 0)], [np.full(3, 2.0, np.float32)])
    np.testing.assert_allclose(server.value(("w", 0)), np.zeros(3))  # 1 - 0.5 * 2


@pytest.mark.parametrize(("description", "error", "message"), [
    (json.dumps({"name": "no_such_optimizer"}), MissingComponentError, "no optimizer 'no_such_optimizer'"),
    ("{not json", KVStoreError, "must be JSON text"),
    (json.dumps(["sgd"]), KVStoreError, "a JSON object with a 'name'"),
])
def test_a_bad_optimizer_description_is_a_clear_error(description, error, message):
    from mxkit.kvstore.dist.server import ParameterServer

    server = ParameterServer(0, num_workers=1)
    with pytest.raises(error, match=message):
        server.set_optimizer(0, description)


def test_teststore_broadcasts_and_sums_and_refuses_the_rest():
    import mxkit.kvstore as kvs
    import mxkit.ndarray as nd
    from mxkit.core import cpu

    store = kvs.create("teststore")
    assert (store.type, store.rank, store.num_workers) == ("teststore", 0, 1)
    assert not store.is_capable("optimizer")
    outs = [nd.zeros((2, 3), ctx=cpu(0)), nd.zeros((2, 3), ctx=cpu(1))]
    store.broadcast(3, nd.ones((2, 3)) * 2, out=outs)
    for out in outs:
        np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 2.0))
    a, b = np.arange(6.0).reshape(2, 3), np.full((2, 3), 0.5)
    grads = [nd.array(a, ctx=cpu(0)), nd.array(b, ctx=cpu(1))]
    store.pushpull(3, grads)  # in place
    for grad in grads:
        np.testing.assert_allclose(grad.asnumpy(), a + b)
    target = nd.zeros((2, 3))
    store.pushpull(3, [nd.array(a), nd.array(a)], out=target)
    np.testing.assert_allclose(target.asnumpy(), 2 * a)
    with pytest.raises(KVStoreError, match="one shape"):
        store.pushpull(3, [nd.zeros((2, 3)), nd.zeros((3, 2))])
    for call in (lambda: store.push(3, grads), lambda: store.pull(3, out=grads), lambda: store.init(3, grads[0]),
                 lambda: store.set_optimizer(None)):
        with pytest.raises(KVStoreError, match="'teststore' store has no"):
            call()
    with pytest.raises(KVStoreError, match="takes no options"):
        kvs.create("teststore", consistency="eventual")
