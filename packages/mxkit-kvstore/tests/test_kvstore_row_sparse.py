"""Row-sparse values in the single-machine KVStore: push and init take them (as their dense
values), pull leaves row-sparse outputs alone unless ignore_sparse=False, and row_sparse_pull
gives exactly the requested rows; checked against numpy, with the errors MXNet raises."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit import kvstore
from mxkit.core import Context
from mxkit.core.errors import KVStoreError

SHAPE = (6, 3)


def _stored(kv_type="local"):
    kv = kvstore.create(kv_type)
    value = np.arange(18, dtype=np.float32).reshape(SHAPE) + 1
    kv.init("w", nd.array(value).tostype("row_sparse"))
    return kv, value


@pytest.mark.parametrize("kv_type", ["local", "device"])
def test_row_sparse_pull_gives_the_requested_rows_on_each_device(kv_type):
    kv, value = _stored(kv_type)
    outs = [nd.zeros(SHAPE, Context("cpu", i), stype="row_sparse") for i in range(2)]
    row_ids = [nd.array([[4, 1], [4, 0]]), nd.array([5])]
    kv.row_sparse_pull("w", out=outs, row_ids=row_ids)
    for index, (out, rows) in enumerate(zip(outs, ([0, 1, 4], [5]))):
        assert out.context.device_id == index  # (== of arrays is elementwise, as in MXNet: no list.index)
        np.testing.assert_array_equal(out.indices.asnumpy(), rows)
        want = np.zeros(SHAPE, np.float32)
        want[rows] = value[rows]
        np.testing.assert_array_equal(out.asnumpy(), want)


def test_pushed_row_sparse_values_sum_as_dense_ones():
    kv, _ = _stored()
    rng = np.random.default_rng(4)
    pushed = [np.where(rng.random((6, 1)) < 0.5, rng.standard_normal(SHAPE), 0).astype(np.float32) for _ in range(3)]
    kv.push("w", [nd.array(p).tostype("row_sparse").copyto(Context("cpu", i)) for i, p in enumerate(pushed)])
    out = nd.zeros(SHAPE)
    kv.pull("w", out=out)
    np.testing.assert_allclose(out.asnumpy(), sum(pushed), rtol=1e-6)


def test_pull_leaves_row_sparse_outputs_unless_asked():
    kv, value = _stored()
    untouched = (nd.ones(SHAPE) * 2).tostype("row_sparse")
    dense = nd.zeros(SHAPE)
    kv.pull("w", out=[untouched, dense])
    np.testing.assert_array_equal(untouched.asnumpy(), np.full(SHAPE, 2.0))
    np.testing.assert_array_equal(dense.asnumpy(), value)
    kv.pull("w", out=untouched, ignore_sparse=False)
    np.testing.assert_array_equal(untouched.asnumpy(), value)


def test_updater_receives_the_dense_sum():
    kv, value = _stored()
    seen = []

    def updater(key, pushed, stored):
        seen.append(type(pushed).__name__)
        stored += pushed

    kv._set_updater(updater)
    kv.push("w", nd.ones(SHAPE).tostype("row_sparse"))
    out = nd.zeros(SHAPE)
    kv.pull("w", out=out)
    np.testing.assert_array_equal(out.asnumpy(), value + 1)
    assert seen == ["NDArray"]


def test_row_sparse_pull_errors():
    kv, _ = _stored()
    with pytest.raises(KVStoreError, match="must be row_sparse arrays"):
        kv.row_sparse_pull("w", out=nd.zeros(SHAPE), row_ids=nd.array([1]))
    with pytest.raises(KVStoreError, match="needs out="):
        kv.row_sparse_pull("w", out=nd.zeros(SHAPE, stype="row_sparse"))
    with pytest.raises(KVStoreError, match="outside"):
        kv.row_sparse_pull("w", out=nd.zeros(SHAPE, stype="row_sparse"), row_ids=nd.array([6]))
    with pytest.raises(KVStoreError, match="2 row_ids for 1 outputs"):
        kv.row_sparse_pull("w", out=[nd.zeros(SHAPE, stype="row_sparse")], row_ids=[nd.array([1]), nd.array([2])])
    with pytest.raises(KVStoreError, match="keys must be all ints or all strs"):
        kv.row_sparse_pull(3, out=nd.zeros(SHAPE, stype="row_sparse"), row_ids=nd.array([1]))


def test_distributed_stores_refuse_row_sparse_values_by_key():
    # the dist_* stores move dense arrays only; their argument check names the key and the way out
    from mxkit.kvstore.keys import dense_only, group

    dense = nd.ones(SHAPE)
    assert dense_only(group("w", dense, "push"), "push", "dist_sync") == [("w", [dense])]
    with pytest.raises(KVStoreError, match=r"push of key 'w': the 'dist_sync' store moves dense arrays only"):
        dense_only(group("w", [dense, dense.tostype("row_sparse")], "push"), "push", "dist_sync")


def test_row_sparse_pull_of_a_key_list():
    kv = kvstore.create("local")
    values = {k: np.full(SHAPE, i + 1, np.float32) for i, k in enumerate(("a", "b"))}
    for k, v in values.items():
        kv.init(k, nd.array(v))
    outs = [[nd.zeros(SHAPE, stype="row_sparse")], [nd.zeros(SHAPE, stype="row_sparse")]]
    kv.row_sparse_pull(["a", "b"], out=outs, row_ids=[[nd.array([2])], [nd.array([0, 5])]])
    np.testing.assert_array_equal(outs[0][0].indices.asnumpy(), [2])
    np.testing.assert_array_equal(outs[1][0].data.asnumpy(), values["b"][[0, 5]])
    with pytest.raises(KVStoreError, match="with repeats"):
        kv.row_sparse_pull(["a", "a"], out=outs, row_ids=[nd.array([1]), nd.array([2])])
    with pytest.raises(KVStoreError, match="one entry"):
        kv.row_sparse_pull(["a", "b"], out=outs, row_ids=nd.array([1]))
