"""The data channel (persistent TCP connections between workers and servers): frames round
trip every dtype exactly, malformed frames fail clearly without disturbing other
connections, a dead server is named, and random push/pull sequences match a serial replay."""

import socket
import struct
import threading
import time

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import EngineError, KVStoreError
from mxkit.kvstore.dist import auth, channel, frames
from mxkit.kvstore.dist.channel import ChannelLost, Connection
from mxkit.kvstore.dist.server import ParameterServer

pytestmark = [pytest.mark.timeout(120)]

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture
def plain_server():
    """A ParameterServer without Ray (one worker, dist_sync), serving its data channel on loopback."""
    server = ParameterServer(0, num_workers=1, secret=SECRET)
    server.configure(0, "sequential", {})
    yield server
    if server._channel is not None:
        server._channel.close()


SECRET = auth.new_secret()


def connect(server, timeout=10.0):
    return Connection(0, server.channel_address, timeout, SECRET)


def raw_socket(server):
    """A socket past the handshake: what it sends next is read as frames."""
    sock = socket.create_connection(server.channel_address(), timeout=10.0)
    auth.respond(sock, SECRET)
    return sock


def test_the_channel_listens_on_loopback_only_outside_ray(plain_server):
    assert plain_server.channel_address()[0] == "127.0.0.1"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_and_a_0d_and_an_empty_array_round_trip_exactly(plain_server, dtype):
    rng = np.random.default_rng(0)
    values = {"matrix": np.abs(rng.normal(size=(3, 5)) * 50).astype(dtype),
              "scalar": np.array(abs(rng.normal()) * 9, dtype),
              "empty": np.zeros((0, 4), dtype)}
    plain_server.init([((key, 0), np.zeros_like(value)) for key, value in values.items()])
    connection = connect(plain_server)
    items = [((key, 0), 1) for key in values]
    answer = connection.pull(0, 0, items, 5.0, rounds=[((key, 0), 0) for key in values],
                             payloads=list(values.values())).result()
    pulled, clocks = answer
    assert clocks == [(1, 1)] * 3
    for expected, got in zip(values.values(), pulled, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    connection.close()


def test_frames_check_what_they_carry():
    left, right = socket.socketpair()
    with left, right:
        frames.send_frame(left, {"x": 1}, [np.arange(3, dtype=np.int16), np.ones((2, 0)), np.float32(2.5)])
        header, arrays = frames.receive_frame(right)
        assert header["x"] == 1 and [a.dtype.str for a in arrays] == ["<i2", "<f8", "<f4"]
        np.testing.assert_array_equal(arrays[0], [0, 1, 2])
        assert arrays[1].shape == (2, 0) and arrays[2].shape == () and arrays[2] == 2.5


def test_a_connection_opened_early_is_used_by_the_first_request_and_a_failed_one_is_left_to_it(plain_server):
    connection = connect(plain_server)
    connection.connect_early()
    opened = connection.sock
    assert opened is not None
    connection.connect_early()  # (open: nothing to do)
    assert connection.sock is opened
    plain_server.init([(("w", 0), np.zeros(2, np.float32))])
    assert connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()[1] == [(0, 0)]
    assert connection.sock is opened
    connection.close()

    def nowhere():
        raise ChannelLost("server 0: gone")

    unreachable = Connection(0, nowhere, 1.0, SECRET)
    unreachable.connect_early()  # says nothing: the first request says what went wrong
    assert unreachable.sock is None
    with pytest.raises(ChannelLost, match="gone"):
        unreachable.pull(0, 0, [(("w", 0), 0)], 5.0)


def test_a_body_is_received_into_again_only_once_nothing_holds_it():
    pool = frames.BodyPool(keep=2)
    size = frames.POOLED_MIN_BYTES
    view = pool.take(size)[16:].view(np.float32)  # an array of a frame: its body stays its own
    first = id(pool.bodies[0])
    assert id(pool.take(size)) != first  # (the body taken here is let go at once)
    del view
    assert id(pool.take(size)) == first  # nothing holds it now
    held = [pool.take(size), pool.take(size)]  # both kept ones
    third = pool.take(size)  # both held: a new one, and the oldest is let go
    assert all(third is not body for body in held) and len(pool.bodies) == 2
    assert id(held[0]) == first and all(body is not held[0] for body in pool.bodies)
    assert pool.take(size + 16).nbytes == size + 16  # another size: a body of its own
    small, huge = pool.take(size - 1), pool.take(frames.POOLED_MAX_BYTES + 1)
    assert all(small is not body and huge is not body for body in pool.bodies)  # out of range: never kept


def test_frames_received_through_a_pool_keep_the_values_of_earlier_frames():
    left, right = socket.socketpair()
    values = [np.full(frames.POOLED_MIN_BYTES // 4, index, np.float32) for index in range(4)]

    def send_all():
        for index, value in enumerate(values):
            frames.send_frame(left, {"n": index}, [value])

    sender = threading.Thread(target=send_all)
    sender.start()
    try:
        pool = frames.BodyPool()
        kept = []
        for index in range(len(values)):
            header, (array,) = frames.receive_frame(right, pool=pool)
            assert header["n"] == index
            if index % 2 == 0:
                kept.append(array)  # held: later frames must not land in its body
        for array, value in zip(kept, values[::2], strict=True):
            np.testing.assert_array_equal(array, value)
    finally:
        sender.join(10)
        left.close()
        right.close()


def raw_frame(head, declared_body=0, version=frames.VERSION, declared_head=None):
    """A frame's bytes with a prefix that may lie about its lengths."""
    size = len(head) if declared_head is None else declared_head
    return frames.PREFIX.pack(frames.MAGIC, version, 0, size, declared_body) + head


@pytest.mark.parametrize(("frame", "message"), [
    (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "starts with b'GET '"),
    (raw_frame(b"{}", version=7), "frame version 7"),
    (raw_frame(b"{nope"), "not UTF-8 JSON"),
    (raw_frame(b"[1, 2]"), "its header is a JSON object, got list"),
    (raw_frame(b'{"arrays": [["|O", [1]]]}', 8), "dtype '|O' cannot cross"),
    (raw_frame(b'{"arrays": [["<f4", [-2]]]}'), "a shape is a list of at most 32 ints >= 0, got [-2]"),
    (raw_frame(b'{"arrays": [["<f4", [2]]]}', 3), "its body has 3 bytes, its arrays need 8"),
    (raw_frame(b'{"op": "pu', declared_head=100), "truncated frame"),
    (raw_frame(b'{"arrays": [["<f4", [2]]]}', 8) + b"1234", "truncated frame"),
    (raw_frame(b'{"op": "push", "rank": -1, "epoch": 0}'), "'rank' must be an int >= 0, got -1"),
    (raw_frame(b'{"op": "drop tables", "rank": 0, "epoch": 0}'), "'op' is one of push, pull, pushpull"),
    (raw_frame(b'{"op": "pull", "rank": 0, "epoch": 0, "timeout": 1, "items": [[[1], 0, 0]]}'),
     "[key (int or str), part >= 0, round >= 0], got [[1], 0, 0]"),
    # packed pushes are cut by the sizes of the server's keys ("w" has 3 elements)
    (raw_frame(b'{"op": "push", "rank": 0, "epoch": 0, "values": [-2], "packed": 1, "rounds": [["w", 0, 0]], '
               b'"arrays": [["<f4", [2]]]}', 8) + bytes(8), "packed buffer 0 has 2 elements, fewer than its values"),
    (raw_frame(b'{"op": "push", "rank": 0, "epoch": 0, "values": [-2], "packed": 1, "rounds": [["w", 0, 0]], '
               b'"arrays": [["<f4", [5]]]}', 20) + bytes(20), "packed buffer 0 has 5 elements, its values need 3"),
    (raw_frame(b'{"op": "push", "rank": 0, "epoch": 0, "values": [-2, -2], "packed": 1, "rounds": [["w", 0, 0]], '
               b'"arrays": [["<f4", [6]]]}', 24) + bytes(24), "1 rounds but 2 values"),
])
def test_a_malformed_frame_is_answered_with_a_clear_error_and_others_are_still_served(plain_server, frame, message):
    plain_server.init([(("w", 0), np.zeros(3, np.float32))])
    healthy = connect(plain_server)
    bad = raw_socket(plain_server)
    bad.sendall(frame)
    # by now the server may have answered and ended the stream; ending it must not reset the
    # connection (that loses the answer), even with input it did not read
    time.sleep(0.2)
    bad.shutdown(socket.SHUT_WR)  # a truncated frame ends here
    header, _ = frames.receive_frame(bad)
    assert header["ok"] is False and header["error"] == "ChannelError"
    assert message in header["message"]
    bad.close()
    values, _ = healthy.pull(0, 0, [(("w", 0), 1)], 5.0, rounds=[(("w", 0), 0)],
                             payloads=[np.array([1, 2, 3], np.float32)]).result()
    np.testing.assert_array_equal(values[0], [1, 2, 3])
    healthy.close()


def test_a_request_the_server_rejects_fails_with_its_own_error_and_the_connection_goes_on(plain_server):
    connection = connect(plain_server)
    with pytest.raises(KVStoreError, match="before init"):
        connection.pull(0, 0, [(("never", 0), 0)], 5.0).result()
    plain_server.init([(("w", 0), np.zeros(2, np.float32))])
    values, _ = connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    np.testing.assert_array_equal(values[0], [0, 0])
    connection.close()


def test_a_dropped_connection_fails_waiting_requests_with_channel_lost(plain_server):
    connection = connect(plain_server)
    plain_server.init([(("w", 0), np.zeros(2, np.float32))])
    connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    connection.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(ChannelLost, match=r"server 0 at 127\.0\.0\.1:\d+ dropped"):
        connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    values, _ = connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()  # reconnects
    assert values[0].shape == (2,)
    connection.close()


# -- requests to several servers at once -------------------------------------------------------


def small_buffered_pairs(count):
    """Connected socket pairs with small kernel buffers (a frame of a few MiB cannot fit in
    them: the writer must wait for its reader), timeouts as a worker's connections have."""
    pairs = [socket.socketpair() for _ in range(count)]
    for ours, theirs in pairs:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        ours.settimeout(10.0)
        theirs.settimeout(10.0)
    return pairs


def test_frames_to_several_sockets_are_written_at_once_so_a_stalled_reader_holds_up_only_its_own():
    pairs = small_buffered_pairs(2)
    values = [np.arange(1 << 20, dtype=np.float32) * (index + 1) for index in range(2)]  # 4 MiB each
    outgoing = []
    for index, ((ours, _), value) in enumerate(zip(pairs, values, strict=True)):
        item = frames.Outgoing(ours)
        item.add({"frame": index}, [value])
        outgoing.append(item)
    received, second_read = {}, threading.Event()

    def read(index):
        if index == 0:  # the first reader takes nothing until the second has its whole frame:
            second_read.wait(30.0)  # written one socket after the other, neither would finish
        received[index] = frames.receive_frame(pairs[index][1])
        if index == 1:
            second_read.set()

    readers = [threading.Thread(target=read, args=(index,)) for index in range(2)]
    for reader in readers:
        reader.start()
    errors = frames.send_together(outgoing, 10.0)
    for reader in readers:
        reader.join(30.0)
    assert errors == [None, None]
    for index, value in enumerate(values):
        header, arrays = received[index]
        assert header["frame"] == index
        np.testing.assert_array_equal(arrays[0], value)
    for pair in pairs:
        for sock in pair:
            sock.close()


def test_a_socket_that_fails_stops_only_its_own_frames():
    pairs = small_buffered_pairs(3)
    pairs[1][1].close()  # its reader is gone: writing to it fails
    value = np.arange(1 << 19, dtype=np.float64)  # 4 MiB
    outgoing = []
    for ours, _ in pairs:
        item = frames.Outgoing(ours)
        item.add({"n": 1}, [value])
        item.add({"n": 2}, [value[:3]])  # a socket's frames follow one another
        outgoing.append(item)
    received = {}

    def read(index):
        received[index] = [frames.receive_frame(pairs[index][1]) for _ in range(2)]

    readers = [threading.Thread(target=read, args=(index,)) for index in (0, 2)]
    for reader in readers:
        reader.start()
    errors = frames.send_together(outgoing, 10.0)
    for reader in readers:
        reader.join(30.0)
    assert errors[0] is None and errors[2] is None
    assert isinstance(errors[1], OSError)
    for index in (0, 2):
        (first, (big,)), (second, (small,)) = received[index]
        assert (first["n"], second["n"]) == (1, 2)
        np.testing.assert_array_equal(big, value)
        np.testing.assert_array_equal(small, value[:3])
    for pair in pairs:
        for sock in pair:
            sock.close()


def two_plain_servers(num_workers=(1, 1)):
    servers = []
    for count in num_workers:
        server = ParameterServer(0, num_workers=count, secret=SECRET)
        server.configure(0, "sequential", {})
        server.init([(("w", 0), np.zeros(3, np.float32))])
        servers.append(server)
    return servers, [Connection(index, server.channel_address, 10.0, SECRET) for index, server in enumerate(servers)]


def close_all(servers, connections):
    for connection in connections:
        connection.close()
    for server in servers:
        server._channel.close()


def test_an_outbox_sends_every_servers_requests_and_names_a_dropped_one():
    servers, connections = two_plain_servers()
    try:
        for connection in connections:
            connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()  # connected
        connections[0].sock.shutdown(socket.SHUT_RDWR)
        one = np.ones(3, np.float32)
        with pytest.raises(ChannelLost, match=r"push \(server 0\): the connection to server 0 at .* dropped"):
            with channel.Outbox() as outbox:
                pushes = [connection.push(0, 0, [(("w", 0), 0)], [one], outbox=outbox) for connection in connections]
                assert not any(push.sent for push in pushes)  # queued: written when the block ends
        assert pushes[0].done and isinstance(pushes[0].error, ChannelLost)
        assert pushes[1].sent
        values, _ = connections[1].pull(0, 0, [(("w", 0), 1)], 5.0).result()
        np.testing.assert_array_equal(values[0], one)  # the other server got its push, once
        assert servers[1].table.rounds(("w", 0)) == ([1], [1])
        assert servers[0].table.rounds(("w", 0)) == ([0], [0])  # and the dropped one nothing
        values, _ = connections[0].pull(0, 0, [(("w", 0), 0)], 5.0).result()  # reconnects
        np.testing.assert_array_equal(values[0], np.zeros(3))
    finally:
        close_all(servers, connections)


def test_answers_are_read_as_they_come_and_a_failed_one_is_raised_at_once():
    # server 0 waits for a second worker before it answers; server 1 answers at once
    servers, connections = two_plain_servers(num_workers=(2, 1))
    try:
        one = np.ones(3, np.float32)
        with channel.Outbox() as outbox:
            waits = connections[0].pull(0, 0, [(("w", 0), 1)], 30.0, [(("w", 0), 0)], [one], outbox=outbox)
            answers = connections[1].pull(0, 0, [(("w", 0), 1)], 30.0, [(("w", 0), 0)], [one], outbox=outbox)
        fails = connections[1].pull(0, 0, [(("never", 0), 0)], 30.0)
        with pytest.raises(KVStoreError, match="before init"):
            channel.results([waits, answers, fails])
        assert answers.done and not waits.done  # read past server 0, which has not answered
        servers[0].push_values(1, 0, [(("w", 0), 0)], [one * 2])  # the second worker's push
        (values, _), (others, _) = channel.results([waits, answers])
        np.testing.assert_array_equal(values[0], one * 3)
        np.testing.assert_array_equal(others[0], one)
    finally:
        close_all(servers, connections)


def test_an_answer_awaited_before_its_outbox_is_flushed_is_an_error_not_a_hang(plain_server):
    connection = connect(plain_server)
    plain_server.init([(("w", 0), np.zeros(2, np.float32))])
    outbox = channel.Outbox()
    pending = connection.pull(0, 0, [(("w", 0), 0)], 5.0, outbox=outbox)
    with pytest.raises(KVStoreError, match="awaited before its request was sent"):
        pending.result()
    outbox.flush()
    values, _ = pending.result()
    np.testing.assert_array_equal(values[0], [0, 0])
    connection.close()


# -- over Ray ------------------------------------------------------------------------------


@pytest.mark.ray
def test_a_job_server_listens_on_the_host_ray_is_bound_to_and_survives_garbage(shared_job, workers):
    import ray

    job = shared_job(2, 1)
    host, port = ray.get(job.servers[0].channel_address.remote())
    assert host == "127.0.0.1"
    with socket.create_connection((host, port), timeout=10.0) as bad:  # not of the job: closed unanswered
        bad.recv(auth.CHALLENGE_BYTES)
        bad.sendall(struct.pack("!4s", b"JUNK") + bytes(40))
        assert _read_to_end(bad) == b""
    secret = ray.get(job.coordinator.join.remote(0, "dist_sync", ("sequential", {})))["secret"]
    with socket.create_connection((host, port), timeout=10.0) as bad:  # of the job, but garbage
        auth.respond(bad, secret)
        bad.sendall(struct.pack("!4s", b"JUNK") + bytes(40))
        header, _ = frames.receive_frame(bad)
        assert header["error"] == "ChannelError" and "b'JUNK'" in header["message"]

    def worker(kv):
        kv.init("after-garbage", nd.zeros((2,)))
        kv.push("after-garbage", nd.ones((2,)) * (kv.rank + 1))
        out = nd.zeros((2,))
        kv.pull("after-garbage", out=out)
        return out.asnumpy()

    for out in workers(job, worker):
        np.testing.assert_array_equal(out, [3, 3])


@pytest.mark.ray
def test_a_dead_server_that_does_not_come_back_is_named_within_the_timeout(start_job, workers):
    import ray

    job = start_job(1, 1, max_restarts=0)

    def worker(kv):
        kv.init("k", nd.zeros((2,)))
        out = nd.zeros((2,))
        kv.pushpull("k", nd.ones((2,)), out=out)
        address = ray.get(job.servers[0].channel_address.remote())
        ray.kill(job.servers[0], no_restart=True)
        _wait_until_ray_reports_dead(job.servers[0], within=30.0)
        # Ray reports the actor dead before its process has exited, and until then the
        # process still answers on its data channel: wait until its socket is closed.
        _wait_until_nothing_listens(address, within=30.0)
        started = time.monotonic()
        try:
            # a dying server's socket can still take the connection and reset it in the handshake
            with pytest.raises(KVStoreError, match=r"server 0.*(dropped|died|dead|cannot connect)"):
                kv.pushpull("k", nd.ones((2,)), out=out)
                kv.pull("k", out=out)  # an overlapped pushpull's error is raised by the store's next call
            return time.monotonic() - started
        finally:
            # when the pushpull ran overlapped, its output holds the failure: reading it reports
            # that failure, so a later wait_all elsewhere in this process does not raise it again
            try:
                out.wait_to_read()
            except EngineError as error:
                assert "kvstore.pushpull" in str(error)

    (elapsed,) = workers(job, worker, timeout=5.0)
    assert elapsed < 5.0


def _add_into(key, grad, weight):
    weight[:] = weight + grad


def _key_on(server, prefix):
    """A key name that a 2-server job keeps whole on ``server``."""
    from mxkit.kvstore.dist.sharding import ShardPlan

    plan = ShardPlan(2, 50)
    return next(f"{prefix}{n}" for n in range(1000) if plan.parts(f"{prefix}{n}", 4)[0].server == server)


@pytest.mark.ray
@pytest.mark.parametrize(("overlap", "batch"), [(False, False), (True, False), (True, True)])
def test_a_server_dead_before_a_call_to_both_fails_it_and_the_other_server_applied_it_once(start_job, overlap, batch):
    """The call's frames go to both servers at once: the dead one fails the call with a
    KVStoreError naming it, the live one applies its part of the pushes exactly once (a
    cumulative updater: a loss or a second application would show), and the store goes on
    serving the live server's keys."""
    import mxkit.kvstore as kvstore
    import ray
    from mxkit.core import config

    job = start_job(1, 2, bigarray_bound=50, max_restarts=0, allow_remote_code=True)
    with config.override(kvstore_overlap=overlap, kvstore_batch=batch):
        kv = kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=5.0,
                            allow_remote_code=True)
    kv.set_updater(_add_into)
    keys = [_key_on(0, "live"), "split", _key_on(1, "dead")]
    shapes = [(4,), (60,), (4,)]  # "split": 30 elements on each server
    grads = [np.random.default_rng(i).integers(-9, 9, size=(4, *shape)).astype(np.float32)
             for i, shape in enumerate(shapes)]
    kv.init(keys, [nd.zeros(shape) for shape in shapes])
    outs = [nd.zeros(shape) for shape in shapes]
    for step in range(3):
        kv.pushpull(keys, [nd.array(g[step]) for g in grads], out=outs)
    for out, g in zip(outs, grads, strict=True):
        np.testing.assert_array_equal(out.asnumpy(), g[:3].sum(axis=0))
    address = ray.get(job.servers[1].channel_address.remote())
    ray.kill(job.servers[1], no_restart=True)
    _wait_until_ray_reports_dead(job.servers[1], within=30.0)
    _wait_until_nothing_listens(address, within=30.0)
    live = nd.zeros(shapes[0])
    if overlap:  # the call returns at once; reading its outputs raises its error, then the store's next call
        kv.pushpull(keys, [nd.array(g[3]) for g in grads], out=outs)
        with pytest.raises(EngineError, match=r"kvstore\.pushpull.*server 1"):
            outs[0].wait_to_read()
        with pytest.raises(KVStoreError, match=r"server 1"):
            kv.pull(keys[0], out=live)
    else:
        with pytest.raises(KVStoreError, match=r"server 1"):
            kv.pushpull(keys, [nd.array(g[3]) for g in grads], out=outs)
    kv.pull(keys[0], out=live)  # the store still serves the live server
    np.testing.assert_array_equal(live.asnumpy(), grads[0].sum(axis=0))
    # the live server's half of the split key: every push, the failed call's included, once
    np.testing.assert_array_equal(ray.get(job.servers[0].value.remote(("split", 0))),
                                  grads[1].sum(axis=0)[:30])
    assert ray.get(job.servers[0].rounds.remote((keys[0], 0))) == ([4], [4])


def _wait_until_ray_reports_dead(actor, within):
    # ray.kill only asks for the kill: a ping sent right after it can still be answered
    # (seen under load), so ask again until Ray reports the actor dead.
    import ray

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError(f"Ray still reports the killed server alive {within} s after ray.kill")


def _read_to_end(sock):
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with our bytes unread
        pass
    return data


def _wait_until_nothing_listens(address, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(tuple(address), timeout=1.0).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"something still listens on {address} {within} s after the server was killed")


KEYS = st.sampled_from(["a", "b", "c"])
SHAPES = {"a": (3,), "b": (4, 5), "c": (60,)}  # "b" and "c" are split across the two servers (bound 50)


@pytest.mark.ray
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["push", "pull", "pushpull"]), st.lists(KEYS, min_size=1,
                                                                                        max_size=3, unique=True),
                                st.integers(-100, 100)), min_size=1, max_size=8))
def test_random_push_pull_sequences_match_a_serial_numpy_replay(shared_job, steps):
    import mxkit.kvstore as kvstore

    job = shared_job(1, 2)
    test_random_push_pull_sequences_match_a_serial_numpy_replay.count = count = getattr(
        test_random_push_pull_sequences_match_a_serial_numpy_replay, "count", 0) + 1
    kv = kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=20.0)
    names = {key: f"{key}{count}" for key in SHAPES}  # fresh keys per example
    rng = np.random.default_rng(count)
    expected = {key: rng.integers(-9, 9, size=shape).astype(np.float32) for key, shape in SHAPES.items()}
    kv.init([names[k] for k in SHAPES], [nd.array(expected[k]) for k in SHAPES])
    for op, keys, seed in steps:
        pushed = [np.random.default_rng(seed + 1000).integers(-50, 50, size=SHAPES[k]).astype(np.float32)
                  for k in keys]
        outs = [nd.zeros(SHAPES[k]) for k in keys]
        if op == "push":
            kv.push([names[k] for k in keys], [nd.array(p) for p in pushed])
            expected.update(zip(keys, pushed, strict=True))  # one worker, no updater: a round's sum replaces
            continue
        if op == "pushpull":
            kv.pushpull([names[k] for k in keys], [nd.array(p) for p in pushed], out=outs)
            expected.update(zip(keys, pushed, strict=True))
        else:
            kv.pull([names[k] for k in keys], out=outs)
        for key, out in zip(keys, outs, strict=True):
            np.testing.assert_array_equal(out.asnumpy(), expected[key])


def test_many_keys_travel_packed_and_come_back_with_their_shapes_and_dtypes(plain_server):
    rng = np.random.default_rng(1)
    values = {f"k{i}": rng.normal(size=(i % 3 + 1, 4)).astype(np.float32) for i in range(60)}
    values["big"] = rng.normal(size=40_000).astype(np.float32)  # over the packing bound: travels alone
    values["half"] = np.arange(6, dtype=np.float16).reshape(2, 3)
    values["scalar"] = np.array(7, np.int64)
    plain_server.init([((key, 0), np.zeros_like(value)) for key, value in values.items()])
    connection = connect(plain_server)
    keys = list(values)
    pending = connection.pull(0, 0, [((key, 0), 1) for key in keys], 5.0, rounds=[((key, 0), 0) for key in keys],
                              payloads=list(values.values()), shapes=[value.shape for value in values.values()])
    pulled, clocks = pending.result()
    assert clocks == [(1, 1)] * len(keys)
    for expected, got in zip(values.values(), pulled, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    connection.close()


def test_a_packed_push_of_a_key_the_server_does_not_hold_is_refused_and_changes_nothing(plain_server):
    plain_server.init([(("w", 0), np.zeros(3, np.float32))])
    connection = connect(plain_server)
    with pytest.raises(KVStoreError, match="push of key 'nope' before init"):
        connection.pull(0, 0, [(("w", 0), 0)], 5.0, rounds=[(("nope", 0), 0)],
                        payloads=[np.ones(3, np.float32)], shapes=[(3,)]).result()
    values, _ = connection.pull(0, 0, [(("w", 0), 1)], 5.0, rounds=[(("w", 0), 0)],
                                payloads=[np.array([1, 2, 3], np.float32)], shapes=[(3,)]).result()
    np.testing.assert_array_equal(values[0], [1, 2, 3])
    connection.close()


def test_an_updater_runs_on_the_servers_kept_weight_and_on_a_value_replaced_under_it(momentum_sgd):
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from mxkit.kvstore.updater import OptimizerUpdater

    server = ParameterServer(0, num_workers=1, secret=SECRET, allow_remote_code=True)
    server.configure(0, "sequential", {})
    server.init([(("w", 0), np.zeros(4, np.float32))])
    server.set_updater(0, cloudpickle.dumps(OptimizerUpdater(momentum_sgd(learning_rate=0.5, momentum=0.75))))
    connection = connect(server)
    weight, state = np.zeros(4, np.float32), np.zeros(4, np.float32)
    grads = [np.array([1, -2, 0.5, 4], np.float32) * (step + 1) for step in range(4)]
    try:
        for step, grad in enumerate(grads):
            if step == 3:  # the stored value is replaced (as a restore does): the next round starts from it
                weight = np.full(4, 8, np.float32)
                server.table.shards[("w", 0)].value = weight.copy()
            (got,), _ = connection.pull(0, 0, [(("w", 0), step + 1)], 5.0, rounds=[(("w", 0), step)],
                                        payloads=[grad], shapes=[(4,)]).result()
            # the serial replay (values that float32 holds exactly: the same bits either way)
            state = state * np.float32(0.75) - grad * np.float32(0.5)
            weight = weight + state
            np.testing.assert_array_equal(got, weight)
    finally:
        connection.close()
        server._channel.close()


class _AggregatingMomentum:
    """Momentum SGD with MXNet's aggregated protocol (lists of indices, weights, grads and
    states in one ``update`` call when ``aggregate_num > 1``); it records each call's size."""

    def __init__(self, aggregate_num):
        self.aggregate_num = aggregate_num
        self.calls = []

    def create_state(self, index, weight):
        return nd.zeros(weight.shape, ctx=weight.context, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        many = isinstance(index, list)
        self.calls.append(len(index) if many else 1)
        for w, g, s in zip(*(x if many else [x] for x in (weight, grad, state)), strict=True):
            s[:] = s * 0.75 - g * 0.5
            w[:] = w + s


def test_the_rounds_one_request_completes_are_applied_in_one_optimizer_call_with_the_same_bits():
    from mxkit.kvstore.updater import OptimizerUpdater

    rng = np.random.default_rng(3)
    keys = [f"k{i}" for i in range(6)]
    start = {key: rng.normal(size=(i + 1, 3)).astype(np.float32) for i, key in enumerate(keys)}
    servers, optimizers = [], []
    for aggregate_num in (4, 0):
        server = ParameterServer(0, num_workers=1, secret=SECRET)
        server.configure(0, "sequential", {})
        server.init([((key, 0), value.copy()) for key, value in start.items()])
        optimizers.append(_AggregatingMomentum(aggregate_num))
        server._set_update(OptimizerUpdater(optimizers[-1]))
        servers.append(server)
    requests = [[((key, 0), 0) for key in keys], [((key, 0), 1) for key in keys[:3]] + [(("k0", 0), 2)],
                [((key, 0), r) for key in keys[3:] for r in (1, 2)] + [((key, 0), 2) for key in keys[1:3]]]
    for rounds in requests:
        grads = [rng.normal(size=start[shard[0]].shape).astype(np.float32) for shard, _ in rounds]
        for server in servers:
            server.push_values(0, 0, rounds, [g.copy() for g in grads])
    for key in keys:
        assert servers[0].table.rounds((key, 0)) == servers[1].table.rounds((key, 0)) == ([3], [3])
        np.testing.assert_array_equal(servers[0].value((key, 0)), servers[1].value((key, 0)))
    assert max(optimizers[0].calls) == 4 and sum(optimizers[0].calls) == 18
    assert optimizers[1].calls == [1] * 18


def test_a_pushed_frame_buffer_is_kept_only_by_a_value_that_is_most_of_it(plain_server):
    # a kept view keeps the whole frame body alive: a big value is kept without a copy, a
    # small one riding in the same body is copied
    plain_server.init([(("big", 0), np.zeros(1000, np.float32)), (("small", 0), np.zeros(4, np.float32))])
    body = np.arange(1004 * 4, dtype=np.uint8)
    big, small = body[:4000].view(np.float32), body[4000:].view(np.float32)
    plain_server.push_values(0, 0, [(("big", 0), 0), (("small", 0), 0)], [big, small], owned=True)
    assert np.shares_memory(plain_server.table.shards[("big", 0)].value, body)
    assert not np.shares_memory(plain_server.table.shards[("small", 0)].value, body)
    np.testing.assert_array_equal(plain_server.table.shards[("small", 0)].value, small)
