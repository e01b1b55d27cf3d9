"""Nobody outside the job gets into a server's data channel, and nobody can exhaust it:
connections without the job's proof (none, a wrong one, a replayed one) are closed before a
byte of theirs is read as a frame and change nothing; idle connections, oversized size
claims, deeply nested JSON and errors inside a handler leave the server serving its workers."""

import socket
import threading
import time

import numpy as np
import pytest
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist import auth, channel, frames
from mxkit.kvstore.dist.channel import ChannelServer, Connection
from mxkit.kvstore.dist.server import ParameterServer

pytestmark = [pytest.mark.timeout(120)]

SECRET = auth.new_secret()
VALUE = np.arange(4, dtype=np.float32)


@pytest.fixture
def server():
    """A ParameterServer without Ray (one worker, dist_sync) holding key "w", its channel on loopback."""
    server = ParameterServer(0, num_workers=1, secret=SECRET)
    server.configure(0, "sequential", {})
    server.init([(("w", 0), VALUE.copy())])
    server.channel_address()
    server._channel.handshake_timeout = 0.5  # (so that the tests of silent peers are quick)
    yield server
    server._channel.close()


def honest(server):
    return Connection(0, server.channel_address, 10.0, SECRET)


def push_frame(value=-999999.5):
    """The bytes of a well-formed push of ``value`` into every element of key "w"."""
    left, right = socket.socketpair()
    with left, right:
        frames.send_frame(left, {"op": "push", "rank": 0, "epoch": 0, "values": [channel.SINGLE],
                                 "rounds": [["w", 0, 0]]}, [np.full(4, value, np.float32)])
        left.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := right.recv(65536):
            data += chunk
    return data


def closed_without_answer(sock):
    """Whether the peer closed ``sock`` sending nothing but (at most) its challenge."""
    sock.settimeout(10.0)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return len(data) <= auth.CHALLENGE_BYTES and (not data or data.startswith(auth.CHALLENGE_MAGIC))


def unchanged(server):
    np.testing.assert_array_equal(server.value(("w", 0)), VALUE)
    assert server.rounds(("w", 0))[0] == [0]


def test_a_frame_sent_without_any_proof_is_never_read(server):
    with socket.create_connection(server.channel_address(), timeout=10.0) as sock:
        sock.sendall(push_frame())  # where the proof should be: a well-formed push
        assert closed_without_answer(sock)
    unchanged(server)


def test_a_silent_connection_is_closed_after_the_handshake_timeout(server):
    with socket.create_connection(server.channel_address(), timeout=10.0) as sock:
        started = time.monotonic()
        assert closed_without_answer(sock)
        assert time.monotonic() - started < 5.0
    unchanged(server)


def test_a_wrong_secret_is_refused_with_a_clear_error_and_changes_nothing(server):
    stranger = Connection(0, server.channel_address, 10.0, auth.new_secret())
    with pytest.raises(KVStoreError, match="refused this worker's proof"):
        stranger.push(0, 0, [(("w", 0), 0)], [np.full(4, -1.0, np.float32)])
    with socket.create_connection(server.channel_address(), timeout=10.0) as sock:
        nonce = sock.recv(auth.CHALLENGE_BYTES)[len(auth.CHALLENGE_MAGIC):]
        sock.sendall(auth.PROOF_MAGIC + auth.proof(auth.new_secret(), nonce) + push_frame())
        assert closed_without_answer(sock)
    unchanged(server)


def test_a_replayed_proof_is_refused(server):
    # a proof seen on one connection (the right secret, that connection's nonce)...
    with socket.create_connection(server.channel_address(), timeout=10.0) as first:
        nonce = first.recv(auth.CHALLENGE_BYTES)[len(auth.CHALLENGE_MAGIC):]
        recorded = auth.PROOF_MAGIC + auth.proof(SECRET, nonce)
        first.sendall(recorded)
        assert first.recv(len(auth.ACCEPTED)) == auth.ACCEPTED
    # ...does not open another: its nonce is new
    with socket.create_connection(server.channel_address(), timeout=10.0) as second:
        greeting = second.recv(auth.CHALLENGE_BYTES)
        assert greeting[len(auth.CHALLENGE_MAGIC):] != nonce
        second.sendall(recorded + push_frame())
        assert closed_without_answer(second)
    unchanged(server)


def test_the_proof_is_compared_in_constant_time(monkeypatch, server):
    compared = []
    real = auth.hmac.compare_digest
    monkeypatch.setattr(auth.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    connection = honest(server)
    connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    connection.close()
    assert compared == [1]


def test_many_idle_connections_do_not_stop_a_connected_worker_nor_a_new_one_later(server):
    worker = honest(server)
    worker.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    threads_before = threading.active_count()
    idle = [socket.create_connection(server.channel_address(), timeout=10.0) for _ in range(100)]
    try:
        # at most MAX_HANDSHAKES of them hold a thread; the rest are closed at once
        assert threading.active_count() <= threads_before + channel.MAX_HANDSHAKES + 1
        for round_index in range(3):
            values, _ = worker.pull(0, 0, [(("w", 0), round_index + 1)], 5.0, rounds=[(("w", 0), round_index)],
                                    payloads=[np.full(4, round_index, np.float32)]).result()
            np.testing.assert_array_equal(values[0], np.full(4, round_index))
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10.0  # their handshakes time out, and new workers get in again
    while True:
        try:
            late = honest(server)
            late.pull(0, 0, [(("w", 0), 3)], 5.0).result()
            late.close()
            break
        except channel.ChannelLost:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    worker.close()


def authenticated(server):
    sock = socket.create_connection(server.channel_address(), timeout=10.0)
    auth.respond(sock, SECRET)
    return sock


@pytest.mark.parametrize(("header_bytes", "body_bytes"), [(16, 1 << 40), (60 << 20, 0), (16, 2**64 - 1)])
def test_an_oversized_size_claim_is_refused_before_anything_is_allocated(server, header_bytes, body_bytes):
    header_limit, body_limit = server.frame_limits()
    assert body_limit < 4 << 20 and header_limit < 4 << 20  # derived from the one small key it holds
    with authenticated(server) as sock:
        sock.sendall(frames.PREFIX.pack(frames.MAGIC, frames.VERSION, 0, header_bytes, body_bytes))
        header, _ = frames.receive_frame(sock)
    assert header["ok"] is False and "frame too large" in header["message"]
    connection = honest(server)
    values, _ = connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    np.testing.assert_array_equal(values[0], VALUE)
    connection.close()


def test_an_array_spec_larger_than_the_limit_is_refused():
    left, right = socket.socketpair()
    with left, right:
        frames.send_frame(left, {}, [np.zeros(1000, np.float64)])
        with pytest.raises(frames.ChannelError, match="frame too large"):
            frames.receive_frame(right, max_body=4000)


def test_deeply_nested_json_is_a_clear_error_not_a_crash(server):
    head = b"[" * 200_000 + b"]" * 200_000
    with authenticated(server) as sock:
        sock.sendall(frames.PREFIX.pack(frames.MAGIC, frames.VERSION, 0, len(head), 0) + head)
        header, _ = frames.receive_frame(sock)
    assert header["ok"] is False and "nests JSON too deeply" in header["message"]
    unchanged(server)


def test_a_frame_that_stalls_midway_is_dropped(server):
    server._channel.frame_timeout = 0.3
    with authenticated(server) as sock:
        sock.sendall(push_frame()[:10])  # part of a prefix, then nothing
        assert closed_without_answer(sock)
    unchanged(server)


@pytest.mark.parametrize("error", [MemoryError, RecursionError])
def test_memory_and_recursion_errors_in_a_handler_are_answered_and_the_server_goes_on(monkeypatch, server, error):
    def fail(*args, **kwargs):
        raise error("simulated")

    connection = honest(server)
    monkeypatch.setattr(server, "pull_values", fail)
    with pytest.raises(KVStoreError, match="simulated"):
        connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    monkeypatch.undo()
    values, _ = connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    np.testing.assert_array_equal(values[0], VALUE)
    connection.close()


def test_the_accept_loop_survives_any_exception(monkeypatch, server):
    calls = []
    real = ChannelServer._admit

    def flaky(self, sock):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("can't start new thread")
        return real(self, sock)

    monkeypatch.setattr(ChannelServer, "_admit", flaky)
    with socket.create_connection(server.channel_address(), timeout=10.0) as first:
        assert first.recv(1) == b""  # that one is dropped...
    connection = honest(server)  # ...the next is served
    values, _ = connection.pull(0, 0, [(("w", 0), 0)], 5.0).result()
    np.testing.assert_array_equal(values[0], VALUE)
    connection.close()


def test_a_server_without_the_jobs_secret_opens_no_channel():
    with pytest.raises(KVStoreError, match="secret"):
        ParameterServer(0, num_workers=1).channel_address()


def test_the_size_limit_follows_keys_initialised_after_a_connection_opened(server):
    worker = honest(server)
    worker.pull(0, 0, [(("w", 0), 0)], 5.0).result()  # connected, waiting for its next frame
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: over the limit the server had a moment ago
    assert big.nbytes > server.frame_limits()[1]
    server.init([(("big", 0), np.zeros_like(big))])
    values, _ = worker.pull(0, 0, [(("big", 0), 1)], 5.0, rounds=[(("big", 0), 0)], payloads=[big]).result()
    np.testing.assert_array_equal(values[0], big)
    worker.close()
