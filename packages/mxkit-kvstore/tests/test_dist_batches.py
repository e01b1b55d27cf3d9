"""Batched requests (mxkit.kvstore.dist.batches and .plans): a call of many keys as one frame
per server, its key parts defined once per connection and its values one flat array.

The server's merged-in-one-operation path gives the same values bit for bit as the per-key
path (in-process servers fed the same pushes, and a job's stores with config
``kvstore_batch`` on and off, both against numpy replays); every malformed or oversized batch
is refused with an error that says what was wrong, and changes nothing.
"""

import threading

import mxkit.kvstore as kvstore
import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import config
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist import auth, batches, channel
from mxkit.kvstore.dist.channel import Connection, handle_request
from mxkit.kvstore.dist.frames import ChannelError
from mxkit.kvstore.dist.rounds import Shard
from mxkit.kvstore.dist.server import ParameterServer

pytestmark = [pytest.mark.timeout(120)]

SECRET = auth.new_secret()
SHAPES = {1: (3, 5), 2: (7,), 3: (2, 2, 2), 4: (1,), 5: (16,)}


def make_server(num_workers, model="sequential", **options):
    server = ParameterServer(0, num_workers=num_workers, secret=SECRET)
    server.configure(0, model, options)
    rng = np.random.default_rng(5)
    server.init([((key, 0), rng.standard_normal(shape).astype(np.float32)) for key, shape in SHAPES.items()])
    return server


def batch_request(op, rank, values=None, rounds=None, pulled=None, number=0, define=True, keys=tuple(SHAPES)):
    header = {"op": op, "rank": rank, "epoch": 0, "batch": number, "timeout": 5.0}
    if define:
        header["define"] = [[key, 0] for key in keys]
    arrays = []
    if values is not None:
        arrays += [np.concatenate([value.reshape(-1) for value in values]), np.array(rounds, np.int64)]
    if pulled is not None:
        arrays.append(np.array(pulled, np.int64))
    return header, arrays


def per_key_push(server, rank, values, round_index):
    server.push_values(rank, 0, [((key, 0), round_index) for key in SHAPES], [value.copy() for value in values],
                       owned=True)


def values_of(server):
    return [server.value((key, 0)) for key in SHAPES]


@pytest.mark.parametrize(("num_workers", "model"), [(1, "sequential"), (3, "sequential"), (2, "eventual")])
def test_a_batch_merges_bit_for_bit_as_the_per_key_path(num_workers, model, monkeypatch):
    """Pushes of every rank, some batched, some per key, some mixed within a round: the
    batched server's values equal the per-key server's exactly after every round."""
    taken = []
    in_step = batches._push_in_step
    monkeypatch.setattr(batches, "_push_in_step", lambda *args: taken.append(in_step(*args)) or taken[-1])
    rng = np.random.default_rng(11)
    batched, serial = make_server(num_workers, model), make_server(num_workers, model)
    session = {}
    for round_index in range(6):
        for rank in map(int, rng.permutation(num_workers)):
            values = [rng.standard_normal(shape).astype(np.float32) * 3 for shape in SHAPES.values()]
            if round_index == 3 and rank == 0:  # a per-key push among batched ones: the per-shard path
                per_key_push(batched, rank, values, round_index)
            else:
                header, arrays = batch_request("push", int(rank), values, [round_index] * len(SHAPES),
                                               define=not session)
                assert handle_request(batched, header, arrays, session) == ({"ok": True}, [])
            per_key_push(serial, int(rank), values, round_index)
        for got, expected in zip(values_of(batched), values_of(serial), strict=True):
            np.testing.assert_array_equal(got, expected)
            assert got.dtype == expected.dtype == np.float32
    assert taken.count(True) >= 4 * num_workers  # the merge in one operation was taken
    # a batched pull answers with every value flat, in order, and the clocks
    header, arrays = batch_request("pull", 0, pulled=[6] * len(SHAPES), define=False)
    answer, (flat, clocks) = handle_request(batched, header, arrays, session)
    assert answer == {"ok": True, "batch": True}
    np.testing.assert_array_equal(flat, np.concatenate([value.reshape(-1) for value in values_of(serial)]))
    assert clocks.shape == (len(SHAPES), 2) and (clocks[:, 0] == 6).all()


@pytest.mark.parametrize("num_workers", [2, 3])
def test_workers_on_their_own_connections_share_a_batch_and_each_push_is_one_merge(num_workers, monkeypatch):
    """Each worker defines the batch on its own connection: the definitions are one batch, so
    the round a push begins is found by every later push of it (one merge each, no per-shard
    path), and the values equal the per-key server's after every round."""
    taken = []
    in_step = batches._push_in_step
    monkeypatch.setattr(batches, "_push_in_step", lambda *args: taken.append(in_step(*args)) or taken[-1])
    rng = np.random.default_rng(3)
    batched, serial = make_server(num_workers), make_server(num_workers)
    sessions = [{} for _ in range(num_workers)]
    for round_index in range(4):
        for rank in map(int, rng.permutation(num_workers)):
            values = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES.values()]
            header, arrays = batch_request("push", rank, values, [round_index] * len(SHAPES),
                                           define=not sessions[rank])
            assert handle_request(batched, header, arrays, sessions[rank]) == ({"ok": True}, [])
            per_key_push(serial, rank, values, round_index)
        for got, expected in zip(values_of(batched), values_of(serial), strict=True):
            np.testing.assert_array_equal(got, expected)
    assert len({id(session[0]) for session in sessions}) == 1
    assert taken == [True] * (4 * num_workers)
    # a pull that waits for the round's last push is answered once it is in, as a whole
    done = []
    pull = batch_request("pull", 0, pulled=[5] * len(SHAPES), define=False)
    waiting = threading.Thread(target=lambda: done.append(handle_request(batched, *pull, sessions[0])))
    header, arrays = batch_request("push", 0, [np.ones(shape, np.float32) for shape in SHAPES.values()],
                                   [4] * len(SHAPES), define=False)
    handle_request(batched, header, arrays, sessions[0])
    waiting.start()
    for rank in range(1, num_workers):
        waiting.join(0.05)
        assert not done  # (a round is read only once every worker pushed it)
        header, arrays = batch_request("push", rank, [np.ones(shape, np.float32) for shape in SHAPES.values()],
                                       [4] * len(SHAPES), define=False)
        handle_request(batched, header, arrays, sessions[rank])
    waiting.join(10)
    (answer, (flat, clocks)), = done
    assert answer == {"ok": True, "batch": True}
    expected = np.concatenate([value.reshape(-1) for value in values_of(batched)])
    np.testing.assert_array_equal(flat, expected)
    assert (flat == num_workers).all() and (clocks == 5).all()


def test_a_batch_is_shared_only_while_its_shards_are_the_tables():
    server = make_server(2)
    first = server.define_batch([[key, 0] for key in SHAPES])
    assert server.define_batch([[key, 0] for key in SHAPES]) is first
    assert server.define_batch([[key, 0] for key in reversed(SHAPES)]) is not first  # another order
    server.table.shards[(1, 0)] = Shard((1, 0), np.zeros(SHAPES[1], np.float32), 2)  # (as restored states are)
    again = server.define_batch([[key, 0] for key in SHAPES])
    assert again is not first and again.shards[0] is server.table.shards[(1, 0)]


def test_rounds_out_of_step_take_the_per_shard_path_with_the_same_result():
    batched, serial = make_server(2), make_server(2)
    session, rng = {}, np.random.default_rng(2)
    values = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES.values()]
    # key 1 had one more round from rank 0 alone (a per-key push): the batch's rounds differ per key
    for server in (batched, serial):
        server.push_values(0, 0, [((1, 0), 0)], [values[0].copy()])
        server.push_values(1, 0, [((1, 0), 0)], [values[0].copy()])
    rounds = [1, 0, 0, 0, 0]
    for rank in (0, 1):
        header, arrays = batch_request("push", rank, values, rounds, define=not session)
        handle_request(batched, header, arrays, session)
        serial.push_values(rank, 0, [((key, 0), r) for key, r in zip(SHAPES, rounds)], [v.copy() for v in values])
    for got, expected in zip(values_of(batched), values_of(serial), strict=True):
        np.testing.assert_array_equal(got, expected)


def _refused(server, header, arrays, session, error, match):
    before = [value.copy() for value in values_of(server)]
    clocks = [server.rounds((key, 0)) for key in SHAPES]
    with pytest.raises(error, match=match):
        handle_request(server, header, arrays, session)
    for got, expected in zip(values_of(server), before, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert [server.rounds((key, 0)) for key in SHAPES] == clocks


ONES = [np.ones(shape, np.float32) for shape in SHAPES.values()]


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"define": [[1, 0]] * 6}, ChannelError, "a batch of 6 key parts, but this server holds 5"),
    ({"define": [[1, 0], [2, 0], [1, 0]]}, ChannelError, "names part 0 of key 1 twice"),
    ({"define": [[1, 0], [99, 0]]}, KVStoreError, "key 99 before init"),
    ({"define": [[1, 0], [2, -1]]}, ChannelError, r"an item of 'define' is \[key"),
    ({"define": [[1.5, 0]]}, ChannelError, r"an item of 'define' is \[key"),
    ({"define": []}, ChannelError, "non-empty list"),
    ({"define": "everything"}, ChannelError, "non-empty list"),
    ({"batch": batches.MAX_BATCHES}, ChannelError, "'batch' is a batch number from 0 to 255"),
    ({"batch": True}, ChannelError, "'batch' is a batch number"),
    ({"drop_define": True}, ChannelError, "batch 0 is not defined on this connection"),
    ({"values": np.ones(1 << 16, np.float32)}, ChannelError, r"65536 elements of float32 .*hold 47 of float32"),
    ({"values": np.ones(47, np.float64)}, ChannelError, "47 elements of float64"),
    ({"values": np.ones((1, 47), np.float32)}, ChannelError, r"shape \(1, 47\)"),
    ({"rounds": np.zeros(4, np.int64)}, ChannelError, "needs 'rounds' as 5 int64 rounds"),
    ({"rounds": np.zeros(5, np.int32)}, ChannelError, "needs 'rounds' as 5 int64 rounds"),
    ({"rounds": np.array([0, 0, -1, 0, 0], np.int64)}, ChannelError, "'rounds' holds a negative round"),
    ({"arrays": 1}, ChannelError, "a batched push carries 2 arrays, got 1"),
])
def test_a_bad_batch_is_refused_with_a_clear_error_and_changes_nothing(change, error, match):
    server = make_server(1)
    header, arrays = batch_request("push", 0, ONES, [0] * 5)
    if "define" in change:
        header["define"] = change["define"]
    if "batch" in change:
        header["batch"] = change["batch"]
    if change.get("drop_define"):
        del header["define"]
    if "values" in change:
        arrays[0] = change["values"]
    if "rounds" in change:
        arrays[1] = change["rounds"]
    if "arrays" in change:
        arrays = arrays[:change["arrays"]]
    _refused(server, header, arrays, {}, error, match)


def test_a_failed_definition_leaves_the_number_undefined_and_a_mixed_dtype_batch_is_refused():
    server = make_server(1)
    server.init([((9, 0), np.zeros(3, np.int32))])
    session = {}
    header, arrays = batch_request("pull", 0, pulled=[0, 0], keys=(1, 9))
    _refused(server, header, arrays, session, ChannelError, "share one dtype; key 9 is int32")
    header, arrays = batch_request("pull", 0, pulled=[0], keys=(1,), define=False)
    _refused(server, header, arrays, session, ChannelError, "batch 0 is not defined")


def test_a_pull_of_a_batch_checks_its_rounds_and_timeout():
    server = make_server(1)
    session = {}
    header, arrays = batch_request("pull", 0, pulled=[0, 0, 0, 0, -2])
    _refused(server, header, arrays, session, ChannelError, "'pulled' holds a negative round")
    header, arrays = batch_request("pull", 0, pulled=[0] * 5)
    header["timeout"] = 0
    _refused(server, header, arrays, session, ChannelError, "'timeout' must be a positive number")


@pytest.fixture
def plain_server():
    server = make_server(1)
    yield server
    if server._channel is not None:
        server._channel.close()


def test_an_oversized_batch_frame_is_refused_before_it_is_read(plain_server):
    import json
    import socket

    from mxkit.kvstore.dist import frames
    from mxkit.kvstore.dist.plans import ServerShare

    _, body_limit = plain_server.frame_limits()
    header = json.dumps({"op": "push", "rank": 0, "epoch": 0, "batch": 0, "define": [[1, 0]],
                         "arrays": [["<f4", [body_limit]], ["<i8", [1]]]}).encode()
    with socket.create_connection(plain_server.channel_address(), timeout=10) as sock:
        auth.respond(sock, SECRET)
        sock.sendall(frames.PREFIX.pack(frames.MAGIC, frames.VERSION, 0, len(header), 4 * body_limit + 16) + header)
        answer, _ = frames.receive_frame(sock)
    assert answer["ok"] is False and "frame too large" in answer["message"]
    assert plain_server.rounds((1, 0)) == ([0], [0])
    # a worker's connection defines its batch on first use, and again after a drop
    share = ServerShare(0, 0, np.dtype(np.float32))
    for key, shape in SHAPES.items():
        share.add(len(share.slots), key, 0, 0, int(np.prod(shape)))
    connection = Connection(0, plain_server.channel_address, 10.0, SECRET)
    flat = np.concatenate([value.reshape(-1) for value in ONES]) * 2
    for round_index in range(2):
        pending = connection.batch(0, 0, share, flat * (round_index + 1), np.full(5, round_index, np.int64),
                                   pulled=np.full(5, round_index + 1, np.int64), timeout=5.0)
        assert connection.defined == {0: share}
        got, clocks = pending.result()
        np.testing.assert_array_equal(got, flat * (round_index + 1))
        assert clocks.tolist() == [[round_index + 1, round_index + 1]] * 5
        connection.close()
        assert connection.defined == {}
    with pytest.raises(ChannelError, match="a batched answer carries 2 arrays"):
        channel._batch_answer(pending, [flat])


def test_batch_numbers_given_out_again_are_defined_again():
    from mxkit.kvstore.dist.plans import Plans
    from mxkit.kvstore.dist.sharding import Part
    from mxkit.kvstore.dist.transfer import Key

    plans = Plans()

    def plan_of(key):
        return plans.plan([(Key(key, (2,), np.float32, [Part(0, 0, 0, 2, True)]), [None])])

    first = plan_of(0)
    assert plans.known([0]) is first and first.shares[0].number == 0
    for key in range(1, batches.MAX_BATCHES):
        assert plan_of(key).shares[0].number == key
    again = plan_of(batches.MAX_BATCHES)  # out of numbers: the plans start afresh
    assert again.shares[0].number == 0 and plans.known([0]) is None
    connection = Connection(0, lambda: ("127.0.0.1", 1), 1.0, SECRET)
    connection.defined[0] = first.shares[0]
    assert connection.defined.get(again.shares[0].number) is not again.shares[0]  # so batch() defines it again


# -- through a job: stores with batches on and off ---------------------------------------


def _train(run_workers, job, batch, keys, shapes, steps):
    """Rank-by-rank pushes and pulls of ``keys`` through stores with config kvstore_batch
    ``batch``; the pulled values after every step, by rank."""
    def worker(kv):
        rng = np.random.default_rng(100 + kv.rank)
        kv.init(keys, [nd.zeros(shape) for shape in shapes])
        seen = []
        for _ in range(steps):
            grads = [nd.array(rng.integers(-20, 20, size=shape).astype(np.float32) / 8) for shape in shapes]
            kv.push(keys, grads)
            outs = [nd.zeros(shape) for shape in shapes]
            kv.pull(keys, out=outs)
            seen.append([out.asnumpy() for out in outs])
        kv.barrier()
        return seen

    with config.override(kvstore_batch=batch):
        return run_workers(job, worker)


@pytest.mark.ray
def test_a_job_gives_the_same_values_with_batches_on_and_off(shared_job, workers):
    job = shared_job(2, 2)  # bound 50: the 60- and 120-element keys are split across both servers
    shapes = [(3, 4), (60,), (5,), (2, 60), (1,)]
    on = _train(workers, job, True, ["bt_a", "bt_b", "bt_c", "bt_d", "bt_e"], shapes, 4)
    off = _train(workers, job, False, ["bf_a", "bf_b", "bf_c", "bf_d", "bf_e"], shapes, 4)
    # a numpy replay: no updater, so each round's value is the sum of both ranks' pushes
    rngs = [np.random.default_rng(100 + rank) for rank in range(2)]
    for step in range(4):
        grads = [[rng.integers(-20, 20, size=shape).astype(np.float32) / 8 for shape in shapes] for rng in rngs]
        expected = [grads[0][i] + grads[1][i] for i in range(len(shapes))]
        for rank in range(2):
            for got_on, got_off, want in zip(on[rank][step], off[rank][step], expected, strict=True):
                np.testing.assert_array_equal(got_on, want)
                np.testing.assert_array_equal(got_off, want)


# -- pull as an engine operation -----------------------------------------------------------


def one_worker_store(job, overlap=True):
    with config.override(kvstore_overlap=overlap):
        return kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=30.0)


@pytest.mark.ray
def test_pulls_are_ordered_after_the_pushes_before_them(shared_job):
    kv = one_worker_store(shared_job(1, 2))
    keys, shapes = ["ap_a", "ap_b", "ap_c"], [(4,), (60,), (2, 3)]  # ap_b split across the two servers
    kv.init(keys, [nd.zeros(shape) for shape in shapes])
    rng = np.random.default_rng(4)
    pushed, outs = [], []
    for _ in range(5):  # nothing waits in between: each pull is an engine operation
        values = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
        kv.push(keys, [nd.array(value) for value in values])
        out = [nd.zeros(shape) for shape in shapes]
        kv.pull(keys, out=out)
        pushed.append(values)
        outs.append(out)
    kv.pull("ap_b", out=outs[-1][1])  # a single key; ordered after the list's pull writing the same array
    for values, out in zip(pushed, outs, strict=True):
        for value, array in zip(values, out, strict=True):
            np.testing.assert_array_equal(array.asnumpy(), value)  # one worker, no updater: its push
    assert [key for key, _, _ in kv.last_pull_clocks] == ["ap_b"]


@pytest.mark.ray
def test_a_push_of_a_pulled_array_sends_the_pulled_values(shared_job):
    kv = one_worker_store(shared_job(1, 1))
    keys = ["pp_a", "pp_b"]
    kv.init(keys, [nd.zeros((3,)), nd.zeros((2,))])
    kv.push(keys, [nd.ones((3,)) * 3, nd.ones((2,)) * 5])
    pulled = [nd.zeros((3,)), nd.zeros((2,))]
    for _ in range(3):  # each push reads the arrays the pull before it writes (it waits for that pull)
        kv.pull(keys, out=pulled)
        kv.push(keys, pulled)
    final = [nd.zeros((3,)), nd.zeros((2,))]
    kv.pull(keys, out=final)
    np.testing.assert_array_equal(final[0].asnumpy(), np.full(3, 3.0))
    np.testing.assert_array_equal(final[1].asnumpy(), np.full(2, 5.0))


@pytest.mark.ray
def test_a_pull_returns_before_its_answer_and_its_reader_waits(shared_job):
    import threading

    job = shared_job(2, 1)
    returned, results, errors = threading.Event(), {}, []

    def worker(rank):
        try:
            with config.override(kvstore_overlap=True):
                kv = kvstore.create("dist_sync", rank=rank, num_workers=2, namespace=job.namespace, timeout=30.0)
            kv.init(["apw_a", "apw_b"], [nd.zeros((2,)), nd.zeros((3,))])
            outs = [nd.zeros((2,)), nd.zeros((3,))]
            if rank == 1:  # rank 1 pushes only once rank 0's pull returned: a blocking pull never would
                assert returned.wait(60), "rank 0's pull did not return before rank 1 pushed"
            kv.push(["apw_a", "apw_b"], [nd.ones((2,)) * (rank + 1), nd.ones((3,)) * (rank + 1)])
            kv.pull(["apw_a", "apw_b"], out=outs)
            if rank == 0:
                returned.set()
            results[rank] = [(out * 2).asnumpy() for out in outs]
            kv.barrier()
        except Exception as exc:  # reported by the test
            errors.append(exc)
            returned.set()

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert not errors, errors
    for rank in range(2):
        np.testing.assert_array_equal(results[rank][0], np.full(2, 6.0))
        np.testing.assert_array_equal(results[rank][1], np.full(3, 6.0))


@pytest.mark.ray
def test_an_error_of_a_pull_is_raised_by_its_reader_and_the_next_call(start_job):
    from mxkit.core.errors import EngineError

    kv = one_worker_store(start_job(1, 1))
    kv.init("known", nd.zeros((2,)))
    kv._keys["ghost"] = kv._keys["known"].__class__("ghost", (2,), np.float32, kv._keys["known"].parts)
    out = nd.zeros((2,))
    kv.pull(["ghost"], out=[out])  # the server has no such key: its answer is an error
    with pytest.raises(EngineError, match=r"kvstore\.pull.*ghost.*before init"):
        out.wait_to_read()
    with pytest.raises(KVStoreError, match=r"ghost.*before init"):
        kv.pull("known", out=nd.zeros((2,)))
    # the store goes on: later calls work
    kv.push("known", nd.ones((2,)))
    after = nd.zeros((2,))
    kv.pull("known", out=after)
    np.testing.assert_array_equal(after.asnumpy(), np.ones(2))


@pytest.mark.ray
def test_blocking_and_engine_pulls_read_the_same(shared_job):
    job = shared_job(1, 1)
    results = {}
    for overlap in (True, False):
        kv = one_worker_store(job, overlap)
        key = f"same_{overlap}"
        kv.init(key, nd.array(np.arange(6, dtype=np.float32)))
        out = nd.zeros((6,))
        kv.pull(key, out=out)
        results[overlap] = out.asnumpy()
        kv.barrier()
    np.testing.assert_array_equal(results[True], results[False])
    np.testing.assert_array_equal(results[True], np.arange(6, dtype=np.float32))


def test_only_calls_of_small_keys_travel_as_batches():
    from mxkit.kvstore.dist import plans

    elements = plans.MAX_AVERAGE_BYTES // 4  # float32 elements of one key at the bound
    small = [(0, [nd.zeros((3,))]), (1, [nd.zeros((elements,))])]
    assert plans.worth_batching(small)  # one small key brings the average under the bound
    large = [(0, [nd.zeros((elements + 1,))])]
    assert not plans.worth_batching(large)  # a large key goes as its own frame
    assert not plans.worth_batching([*large, (1, [nd.zeros((elements + 1,))])])
    assert not plans.worth_batching([(0, [nd.zeros((3,)), nd.zeros((3,))])])  # several arrays of one key
    assert not plans.worth_batching([])
