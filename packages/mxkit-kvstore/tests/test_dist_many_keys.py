"""Requests of many keys: shard tables carried as int64 arrays, one engine wait for all pushed
arrays, the fast argument check; each against a serial numpy replay, with every malformed
table refused with a clear error."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import KVStoreError, ShapeError
from mxkit.kvstore.dist import auth, channel, transfer
from mxkit.kvstore.dist.channel import Connection, handle_request, shard_table
from mxkit.kvstore.dist.frames import ChannelError
from mxkit.kvstore.dist.server import ParameterServer

pytestmark = [pytest.mark.timeout(120)]

SECRET = auth.new_secret()


@pytest.fixture
def plain_server():
    """A ParameterServer without Ray (one worker, dist_sync) on loopback."""
    server = ParameterServer(0, num_workers=1, secret=SECRET)
    server.configure(0, "sequential", {})
    yield server
    if server._channel is not None:
        server._channel.close()


# -- the tables --------------------------------------------------------------------------


def test_int_keys_travel_as_one_int64_table_and_others_as_json():
    table = shard_table([((3, 0), 5), ((-7, 2), 0), ((2**40, 1), 9)])
    assert table.dtype == np.int64 and table.shape == (3, 3)
    assert table.tolist() == [[3, 0, 5], [-7, 2, 0], [2**40, 1, 9]]
    assert shard_table([(("w", 0), 1), ((3, 0), 1)]) is None  # a str key: JSON
    assert shard_table([((True, 0), 1)]) is None  # not an int key (an equal one would be wrong)
    assert shard_table([((np.int64(4), 0), 1)]) is None
    assert shard_table([((2**70, 0), 1)]) is None  # beyond int64: JSON carries any int
    assert shard_table([]).shape == (0, 3)


def _pull_header(**extra):
    return {"op": "pull", "rank": 0, "epoch": 0, "timeout": 1.0, "items_array": True, **extra}


@pytest.mark.parametrize(("table", "match"), [
    (np.zeros((2, 3), np.float64), "int64 array"),
    (np.zeros((2, 2), np.int64), r"\(n, 3\) int64"),
    (np.zeros((6,), np.int64), r"\(n, 3\) int64"),
    (np.array([[1, -1, 0]], np.int64), "negative part, round"),
    (np.array([[1, 0, -3]], np.int64), "negative part, round"),
    (np.zeros((1, 3), ">i8"), "int64 array"),
])
def test_a_malformed_table_is_refused_and_changes_nothing(plain_server, table, match):
    plain_server.init([((1, 0), np.arange(4, dtype=np.float32))])
    with pytest.raises(ChannelError, match=match):
        handle_request(plain_server, _pull_header(), [table])
    push = {"op": "push", "rank": 0, "epoch": 0, "values": [-1], "packed": 0, "rounds_array": True}
    with pytest.raises(ChannelError, match=match):
        handle_request(plain_server, push, [np.ones(4, np.float32), table])
    np.testing.assert_array_equal(plain_server.value((1, 0)), np.arange(4))
    assert plain_server.rounds((1, 0)) == ([0], [0])


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_a_table_flag_is_true_or_absent(plain_server, flag):
    with pytest.raises(ChannelError, match="'items_array' is true"):
        handle_request(plain_server, _pull_header(items_array=flag), [np.zeros((0, 3), np.int64)])


def test_a_table_flag_without_its_array_is_refused(plain_server):
    with pytest.raises(ChannelError, match="with 0 arrays"):
        handle_request(plain_server, _pull_header(), [])


def test_a_packed_push_of_an_unknown_key_names_it(plain_server):
    rounds = np.array([[41, 0, 0]], np.int64)
    with pytest.raises(KVStoreError, match="key 41 before init"):
        handle_request(plain_server, {"op": "push", "rank": 0, "epoch": 0, "values": [-2], "packed": 1,
                                      "rounds_array": True}, [np.ones(3, np.float32), rounds])


def test_many_keys_of_both_kinds_round_trip_against_a_serial_replay(plain_server):
    """Random pushes and pulls of many int keys (tables as arrays) and str keys (JSON) of
    several dtypes and sizes: what is pulled is exactly the last value pushed (one worker,
    no updater: a round's sum replaces the value)."""
    rng = np.random.default_rng(3)
    dtypes = [np.float32, np.float64, np.int32]
    shapes = {key: tuple(rng.integers(1, 6, size=rng.integers(1, 3))) for key in [*range(-20, 40), "a", "bb"]}
    dtype_of = {key: dtypes[i % 3] for i, key in enumerate(shapes)}
    shapes[7] = (20000,)  # above the channel's packing size: travels as its own array
    plain_server.init([((key, 0), np.zeros(shape, dtype_of[key])) for key, shape in shapes.items()])
    expected = {key: np.zeros(shape, dtype_of[key]) for key, shape in shapes.items()}
    rounds = dict.fromkeys(shapes, 0)
    connection = Connection(0, plain_server.channel_address, 10.0, SECRET)
    int_keys = [key for key in shapes if isinstance(key, int)]
    for step in range(12):
        kind = int_keys if step % 3 else ["a", "bb"]
        chosen = list(rng.choice(len(kind), size=rng.integers(1, len(kind) + 1), replace=False))
        keys = [kind[i] for i in chosen]
        values = [rng.integers(-50, 50, size=shapes[key]).astype(dtype_of[key]) for key in keys]
        pushed = [((key, 0), rounds[key]) for key in keys]
        for key, value in zip(keys, values, strict=True):
            rounds[key] += 1
            expected[key] = value
        asked = keys if step % 2 else list(shapes)
        items = [((key, 0), rounds[key]) for key in asked]
        if step % 4 == 3:  # a push of its own, then a pull
            connection.push(0, 0, pushed, values).result()
            answer = connection.pull(0, 0, items, 5.0, shapes=[shapes[key] for key in asked]).result()
        else:
            answer = connection.pull(0, 0, items, 5.0, pushed, values, [shapes[key] for key in asked]).result()
        pulled, clocks = answer
        assert clocks == [(rounds[key], rounds[key]) for key in asked]
        for key, got in zip(asked, pulled, strict=True):
            assert got.dtype == expected[key].dtype and got.shape == expected[key].shape
            np.testing.assert_array_equal(got, expected[key])
    connection.close()


def test_a_server_of_many_keys_accepts_a_push_of_all_of_them(plain_server):
    """The body limit counts each key's rows of the tables, not only its value."""
    keys = list(range(5000))
    plain_server.init([((key, 0), np.zeros((1,), np.int8)) for key in keys])
    connection = Connection(0, plain_server.channel_address, 10.0, SECRET)
    values = [np.full((1,), key % 100, np.int8) for key in keys]
    pulled, _ = connection.pull(0, 0, [((key, 0), 1) for key in keys], 5.0, [((key, 0), 0) for key in keys],
                                values, [(1,)] * len(keys)).result()
    np.testing.assert_array_equal(np.concatenate(pulled), np.concatenate(values))
    connection.close()


def test_the_answers_clock_table_is_checked(plain_server, monkeypatch):
    """A worker drops a connection whose answer carries a malformed clock table (it cannot
    know where the stream stands): the request fails as a lost connection."""
    plain_server.init([((1, 0), np.zeros((2,), np.float32))])
    real = channel.handle_request

    def bad_clocks(server, header, arrays):
        answer, values = real(server, header, arrays)
        return answer, [*values[:-1], np.array([[1, -1]], np.int64)]

    monkeypatch.setattr(channel, "handle_request", bad_clocks)
    connection = Connection(0, plain_server.channel_address, 10.0, SECRET)
    pending = connection.pull(0, 0, [((1, 0), 0)], 5.0, shapes=[(2,)])
    with pytest.raises(channel.ChannelLost, match="negative part, round or clock"):
        pending.result()


# -- the worker's side -------------------------------------------------------------------


def test_one_wait_for_many_arrays_waits_for_every_write_and_raises_a_failed_one():
    from mxkit.ndarray.invoke import push_raw

    arrays = [nd.zeros((3,)) for _ in range(transfer.WAIT_TOGETHER_MIN + 4)]
    for i, array in enumerate(arrays):
        data = array.storage
        push_raw(lambda data=data, i=i: data.fill(i), [], [array], array.context, "fill", overwrites=True)
    transfer.wait_to_read_all(arrays)
    for i, array in enumerate(arrays):  # read without waiting: the writes must be done
        np.testing.assert_array_equal(array.storage, np.full(3, i))

    def fail():
        raise ValueError("the write of array 5 failed")

    push_raw(fail, [], [arrays[5]], arrays[5].context, "failing", overwrites=True)
    with pytest.raises(Exception, match="the write of array 5 failed"):
        transfer.wait_to_read_all(arrays)
    with pytest.raises(Exception, match="the write of array 5 failed"):
        transfer.wait_to_read_all(arrays[3:6])  # fewer than the minimum: one wait each


def _bare_store(keys):
    """A DistKVStore's argument checks without a job (they need only its keys)."""
    import threading

    from mxkit.kvstore.dist.sharding import ShardPlan
    from mxkit.kvstore.dist.store import DistKVStore
    from mxkit.kvstore.dist.transfer import Key

    store = object.__new__(DistKVStore)
    store._lock = threading.RLock()
    plan = ShardPlan(2, 50)
    store._keys = {key: Key(key, shape, np.float32, plan.parts(key, int(np.prod(shape))))
                   for key, shape in keys.items()}
    store._key_kind = type(next(iter(keys)))
    return store


def test_the_fast_argument_check_agrees_with_the_general_one():
    store = _bare_store({key: (key + 1,) for key in range(10)})
    arrays = [nd.zeros((key + 1,)) for key in range(10)]
    checked = store._checked(list(range(10)), arrays, "push")
    assert [(entry.key, outs) for entry, outs in checked] == [(key, [arrays[key]]) for key in range(10)]
    # a repeated key is grouped (the general path), as MXNet does
    grouped = store._checked([3, 3, 4], [arrays[3], arrays[3], arrays[4]], "push")
    assert [(entry.key, len(outs)) for entry, outs in grouped] == [(3, 2), (4, 1)]
    with pytest.raises(ShapeError, match=r"push of key 2: an array has shape \(5,\), the key was initialised "
                                         r"with shape \(3,\)"):
        store._checked([1, 2], [arrays[1], nd.zeros((5,))], "push")
    with pytest.raises(KVStoreError, match="must be an int or a str"):
        store._checked([True, 2], [arrays[1], arrays[2]], "push")  # True equals key 1 but is no key
    with pytest.raises(KVStoreError, match="pull of key 99 before init"):
        store._checked([1, 99], [arrays[1], arrays[2]], "pull")
    with pytest.raises(KVStoreError, match="needs an NDArray"):
        store._checked([1, 2], [arrays[1], np.zeros(3)], "push")


def test_routes_name_each_parts_server_and_stored_shape():
    store = _bare_store({1: (4, 5), 2: (70,)})  # 70 elements: split across the 2 servers (bound 50)
    whole, split = store._keys[1], store._keys[2]
    assert whole.routes == ((whole.parts[0].server, (1, 0), (4, 5)),)
    assert [route[1:] for route in split.routes] == [((2, part.index), (part.size,)) for part in split.parts]
    assert sum(route[2][0] for route in split.routes) == 70


@pytest.mark.ray
def test_threads_pushing_many_keys_at_once_match_a_serial_replay(start_job):
    """4 threads each push and pull their own list of 30 int keys (whole and split across 2
    servers) through one store: every pull equals the cumulative sum of that thread's pushes."""
    from concurrent.futures import ThreadPoolExecutor

    import mxkit.kvstore as kvstore

    job = start_job(1, 2, bigarray_bound=50, allow_remote_code=True)
    kv = kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=30.0,
                        allow_remote_code=True)
    kv.set_updater(_add_into)
    threads, steps, per_thread = 4, 6, 30
    keys = [[t * 100 + i for i in range(per_thread)] for t in range(threads)]
    shapes = {key: ((key % 7) + 1,) if key % 5 else (60 + key % 3,) for group in keys for key in group}
    kv.init(list(shapes), [nd.zeros(shape) for shape in shapes.values()])
    rng = np.random.default_rng(0)
    grads = {key: rng.integers(-9, 9, size=(steps, *shape)).astype(np.float32) for key, shape in shapes.items()}

    def run(t):
        seen = []
        for step in range(steps):
            outs = [nd.zeros(shapes[key]) for key in keys[t]]
            values = [nd.array(grads[key][step]) for key in keys[t]]
            if step % 2:
                kv.pushpull(keys[t], values, out=outs)
            else:
                kv.push(keys[t], values)
                kv.pull(keys[t], out=outs)
            seen.append([out.asnumpy() for out in outs])
        return seen

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(run, range(threads)))
    for t, seen in enumerate(results):
        for step, pulled in enumerate(seen):
            for key, got in zip(keys[t], pulled, strict=True):
                np.testing.assert_array_equal(got, grads[key][:step + 1].sum(axis=0))


def _add_into(key, grad, weight):
    weight[:] = weight + grad
