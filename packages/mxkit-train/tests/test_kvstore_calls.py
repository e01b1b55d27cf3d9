"""How the training loop calls its KVStore: per key locally, one batched pushpull per step for a distributed store."""

from mxkit import mx
from mxkit.train.model.kvstore_sync import _update_params_on_kvstore


class RecordingStore:
    """A store that applies pushes as a plain sum and records every call."""

    def __init__(self, kind):
        self.type = kind
        self.calls = []
        self.values = {}

    def push(self, key, value, priority=0):
        keys, values = (key, value) if isinstance(key, list) else ([key], [value])
        self.calls.append(("push", tuple(keys), priority))
        for k, arrays in zip(keys, values):
            self.values[k] = sum(a.asnumpy() for a in arrays)

    def pull(self, key, out=None, priority=0):
        keys, outs = (key, out) if isinstance(key, list) else ([key], [out])
        self.calls.append(("pull", tuple(keys), priority))
        for k, targets in zip(keys, outs):
            for target in targets:
                target[:] = self.values[k]


def _params():
    weights = [[mx.nd.zeros((2,)), mx.nd.zeros((2,))] for _ in range(3)]
    grads = [[mx.nd.ones((2,)) * (i + 1), mx.nd.ones((2,))] for i in range(3)]
    grads[1] = [None, None]  # a parameter without a gradient (fixed) is left out
    return weights, grads, ["a", "b", "c"]


def test_a_local_store_gets_one_call_per_key_with_falling_priority():
    store = RecordingStore("local")
    weights, grads, names = _params()
    _update_params_on_kvstore(weights, grads, store, names)
    assert store.calls == [("push", ("a",), 0), ("pull", ("a",), 0), ("push", ("c",), -2), ("pull", ("c",), -2)]
    assert weights[2][1].asnumpy().tolist() == [4.0, 4.0]


class PushPullRecordingStore(RecordingStore):
    """A :class:`RecordingStore` with ``pushpull`` (every mxkit store has it)."""

    def pushpull(self, key, value, out=None, priority=0):
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)
        self.calls[-2:] = [("pushpull", self.calls[-1][1], priority)]


def test_a_distributed_store_gets_one_pushpull_of_every_key_per_step():
    store = PushPullRecordingStore("dist_sync")
    weights, grads, names = _params()
    _update_params_on_kvstore(weights, grads, store, names)
    assert [(what, keys) for what, keys, _ in store.calls] == [("pushpull", ("a", "c"))]
    assert weights[0][0].asnumpy().tolist() == [2.0, 2.0] and weights[2][1].asnumpy().tolist() == [4.0, 4.0]
    assert weights[1][0].asnumpy().tolist() == [0.0, 0.0]


def test_a_distributed_store_without_pushpull_gets_one_push_and_one_pull_per_step():
    store = RecordingStore("dist_sync")
    weights, grads, names = _params()
    _update_params_on_kvstore(weights, grads, store, names)
    assert [(what, keys) for what, keys, _ in store.calls] == [("push", ("a", "c")), ("pull", ("a", "c"))]
    assert weights[0][0].asnumpy().tolist() == [2.0, 2.0] and weights[2][1].asnumpy().tolist() == [4.0, 4.0]
    assert weights[1][0].asnumpy().tolist() == [0.0, 0.0]
