"""The data channel: pushes and pulls over one persistent TCP connection per worker and server.

Ray stays the control plane (starting actors, settings, barriers, recovery); a Ray actor
call costs about 2 ms, so the per-step data would spend most of a step there. Each server
listens on a TCP socket on the host Ray is bound to (127.0.0.1 on one machine) and tells
workers its address through Ray (``ParameterServer.channel_address``). A worker connects
once per server and keeps the connection; a request is one frame (:mod:`.frames`), the
server answers each request with one frame, in order, so a worker can send its pushes
without waiting and read their acknowledgements later.

A call that touches several servers does not send to one after another: it queues its
requests in an :class:`Outbox`, which writes them to every connection at once (one thread,
each socket given what it takes when it can), and :func:`results` reads their answers in
the order they arrive. A connection's frames keep their order, so the per-key order of
pushes and pulls holds as with one request at a time.

Every connection first proves that it belongs to the job (an HMAC challenge-response on
the job's secret, :mod:`.auth`); a peer that cannot is closed before any of its bytes is
read as a frame. A server serves each authenticated connection in its own thread (their
number, the time a frame may take and a frame's size are bounded, see
:class:`ChannelServer`) and runs the same methods the Ray entry points run
(``push_values``, ``pull_values``). A malformed frame is answered with an error frame and
that connection is closed; the other connections are not affected.

When a connection drops (the server died; Ray may restart it at a new port), every
request waiting on it fails with :class:`ChannelLost`, a :class:`~.remote.ActorLost`, so
the worker's recovery (:mod:`.recovery`) runs as for a lost actor call; the next request
resolves the address through Ray again and reconnects.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.core import errors
from mxkit.core.errors import KVStoreError, MXKitError
from mxkit.kvstore.dist import auth, batches, wire
from mxkit.kvstore.dist.frames import BodyPool, ChannelError, Outgoing, receive_frame, send_frame, send_together
from mxkit.kvstore.dist.remote import ActorLost
from mxkit.kvstore.dist.rounds import ResendRequest

#: requests a server's listening socket queues before it accepts them
BACKLOG = 128
#: connections a server keeps open at once (workers hold one each; more are closed on arrival)
MAX_CONNECTIONS = 256
#: connections that may be proving themselves at once (each is closed after auth.HANDSHAKE_TIMEOUT)
MAX_HANDSHAKES = 32
#: a value of a push that is the next array of the frame (see :func:`.wire.flatten`)
SINGLE = wire.SINGLE


class ChannelLost(ActorLost):
    """The connection to a server dropped (it died, or is being restarted by Ray)."""


# -- requests and answers as frames ------------------------------------------------------


def _int(header: dict[str, Any], name: str, minimum: int = 0) -> int:
    value = header.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ChannelError(f"malformed request: {name!r} must be an int >= {minimum}, got {value!r:.100}")
    return value


def _shard_rounds(header: dict[str, Any], name: str) -> list[tuple[tuple[Any, int], int]]:
    """A request's ``[[key, part, round], ...]`` as ``[((key, part), round)]``."""
    triples = header.get(name)
    if not isinstance(triples, list):
        raise ChannelError(f"malformed request: {name!r} must be a list of [key, part, round], got {triples!r:.100}")
    out = []
    # JSON gives exact types (no bool for an int, no subclasses): checked by type, once per
    # item of a request that may name every key of a model
    for triple in triples:
        if type(triple) is not list or len(triple) != 3:
            raise _bad_item(name, triple)
        key, part, round_index = triple
        if (type(key) is not int and type(key) is not str) or type(part) is not int or \
                type(round_index) is not int or part < 0 or round_index < 0:
            raise _bad_item(name, triple)
        out.append(((key, part), round_index))
    return out


def _bad_item(name: str, item: Any) -> ChannelError:
    return ChannelError(f"malformed request: an item of {name!r} is [key (int or str), part >= 0, round >= 0], "
                        f"got {item!r:.100}")


#: the dtype of the tables a frame carries as arrays (shard ids and rounds, clocks)
TABLE_DTYPE = np.dtype(np.int64)


def shard_table(pairs: list[tuple[tuple[Any, int], int]]) -> np.ndarray | None:
    """``[(shard_id, round)]`` as an ``(n, 3)`` int64 array ``[key, part, round]`` when every
    key is an int (the common case of a model's keys), else None (the pairs go as JSON).

    A table of a hundred keys is one array of the frame instead of three hundred JSON
    numbers to write, parse and check one by one.
    """
    table = [(shard[0], shard[1], round_index) for shard, round_index in pairs]
    if not all(type(row[0]) is int for row in table):
        return None
    try:
        return np.array(table, dtype=TABLE_DTYPE).reshape(len(table), 3)
    except OverflowError:  # a key beyond int64: JSON carries any int
        return None


def _table_rows(array: Any, name: str, columns: int) -> list[list[int]]:
    """The rows of a table a frame carries as an array, checked: int64, ``(n, columns)``,
    every column but a shard table's key ``>= 0``."""
    if not isinstance(array, np.ndarray) or array.dtype != TABLE_DTYPE or array.ndim != 2 or \
            array.shape[1] != columns:
        shape = getattr(array, "shape", None)
        raise ChannelError(f"malformed frame: {name!r} travels as an (n, {columns}) int64 array, got "
                           f"{getattr(array, 'dtype', type(array).__name__)} of shape {shape}")
    first = 1 if name != "clocks" else 0  # a shard table's first column is the key (any int)
    if array.size and array[:, first:].min() < 0:
        raise ChannelError(f"malformed frame: {name!r} holds a negative part, round or clock")
    return array.tolist()


def _table_from(header: dict[str, Any], arrays: list[np.ndarray], name: str
                ) -> list[tuple[tuple[Any, int], int]]:
    """A request's ``name`` table: from the frame's last array when the header says it
    travels as one (``"<name>_array": true``; the array is taken off ``arrays``), else JSON."""
    flag = header.get(f"{name}_array", False)
    if flag is False:
        return _shard_rounds(header, name)
    if flag is not True or not arrays:
        raise ChannelError(f"malformed request: '{name}_array' is true with the table as the frame's last "
                           f"array, got {flag!r:.50} with {len(arrays)} arrays")
    return [((key, part), round_index) for key, part, round_index in _table_rows(arrays.pop(), name, 3)]


def _no_shape(index: int) -> tuple[int, ...]:
    raise ChannelError("malformed request: a value is packed but the request has no packed buffers")


def _round_array(array: Any, name: str, count: int) -> np.ndarray:
    """A batched request's ``name`` array, checked: ``count`` int64 rounds >= 0."""
    if not isinstance(array, np.ndarray) or array.dtype != TABLE_DTYPE or array.shape != (count,):
        raise ChannelError(f"malformed request: a batch of {count} key parts needs {name!r} as {count} int64 rounds, "
                           f"got {getattr(array, 'dtype', type(array).__name__)} of shape "
                           f"{getattr(array, 'shape', None)}")
    if count and array.min() < 0:
        raise ChannelError(f"malformed request: {name!r} holds a negative round")
    return array


def _timeout_of(header: dict[str, Any]) -> float:
    timeout = header.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ChannelError(f"malformed request: 'timeout' must be a positive number of seconds, got {timeout!r:.50}")
    return float(timeout)


def handle_batch(server: Any, header: dict[str, Any], arrays: list[np.ndarray], op: str, rank: int, epoch: int,
                 session: dict[int, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Run a batched request (see :mod:`.batches`): ``"batch"`` names a batch of this
    connection (``session``), defined by the request's ``"define"`` list when it has one; the
    arrays are the flat values and the rounds pushed (push), then the rounds to read (pull)."""
    number = header.get("batch")
    if type(number) is not int or not 0 <= number < batches.MAX_BATCHES:
        raise ChannelError(f"malformed request: 'batch' is a batch number from 0 to {batches.MAX_BATCHES - 1}, got "
                           f"{number!r:.50}")
    if "define" in header:
        session.pop(number, None)  # (a failed definition leaves the number undefined)
        session[number] = server.define_batch(header["define"])
    batch = session.get(number)
    if batch is None:
        raise ChannelError(f"malformed request: batch {number} is not defined on this connection (its first "
                           f"request carries 'define', the list of its key parts)")
    expected = {"push": 2, "pull": 1, "pushpull": 3}[op]
    if len(arrays) != expected:
        raise ChannelError(f"malformed request: a batched {op} carries {expected} arrays, got {len(arrays)}")
    count = len(batch.shards)
    if op != "pull":
        flat, rounds = arrays[0], _round_array(arrays[1], "rounds", count)
        if flat.ndim != 1 or flat.dtype != batch.dtype or flat.size != batch.total:
            raise ChannelError(f"malformed request: batch {number}'s values are {flat.size} elements of {flat.dtype} "
                               f"(shape {flat.shape}); its {count} key parts hold {batch.total} of {batch.dtype}")
        # the values are a view of the frame's own fresh buffer: the table may keep them
        server.push_batch(rank, epoch, batch, rounds, flat, owned=True)
    if op == "push":
        return {"ok": True}, []
    timeout = _timeout_of(header)
    flat, clocks = server.pull_batch(rank, epoch, batch, _round_array(arrays[-1], "pulled", count), timeout)
    return {"ok": True, "batch": True}, [flat, np.array(clocks, dtype=TABLE_DTYPE).reshape(count, 2)]


def handle_request(server: Any, header: dict[str, Any], arrays: list[np.ndarray],
                   session: dict[int, Any] | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Run one request on ``server`` (a :class:`~.server.ParameterServer`); its answer.

    ``session`` holds what the connection defined before (its batches); without it, a
    batched request must define its batch itself.
    """
    op = header.get("op")
    if op not in ("push", "pull", "pushpull"):
        raise ChannelError(f"malformed request: 'op' is one of push, pull, pushpull, got {op!r:.50}")
    rank, epoch = _int(header, "rank"), _int(header, "epoch")
    if "batch" in header:
        return handle_batch(server, header, list(arrays), op, rank, epoch, {} if session is None else session)
    arrays = list(arrays)
    # tables carried as arrays are the frame's last ones: the pull's items, then the push's rounds
    pull_items = _table_from(header, arrays, "items") if op != "push" else None
    if op != "pull":
        rounds = _table_from(header, arrays, "rounds")
        layout = header.get("values")
        if type(layout) is list and len(layout) != len(rounds):
            raise ChannelError(f"malformed request: {len(rounds)} rounds but {len(layout)} values")
        groups = header.get("packed", 0)
        # the shapes of packed values, looked up in one pass (only when something is packed)
        shapes = server.shard_shapes([shard for shard, _ in rounds]) if type(groups) is int and groups > 0 else None
        values = wire.unflatten(layout, groups, arrays, shapes.__getitem__ if shapes is not None else _no_shape)
        # the arrays are views of the frame's own fresh buffer: the table may keep them
        server.push_values(rank, epoch, rounds, values, bool(header.get("resend", False)), owned=True)
    if op == "push":
        return {"ok": True}, []
    values, clocks = server.pull_values(rank, epoch, pull_items, _timeout_of(header))
    if header.get("pack") is True:  # the worker knows the shapes: small values travel packed
        answer: dict[str, Any] = {"ok": True, "clocks_array": True}
        answer["values"], answer["packed"], values = wire.flatten(values)
        # the clocks as the answer's last array (one array instead of a JSON pair per item)
        return answer, [*values, np.array(clocks, dtype=TABLE_DTYPE).reshape(len(clocks), 2)]
    return {"ok": True, "clocks": [list(clock) for clock in clocks]}, values


def _error_header(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": type(exc).__name__, "message": str(exc)}


def error_from(header: dict[str, Any], what: str) -> MXKitError:
    """The mxkit error an error answer stands for (its own class for mxkit's errors)."""
    name, message = str(header.get("error")), str(header.get("message"))
    if name == "ResendRequest":
        return ResendRequest(message)
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, MXKitError):
        return cls(message)
    return KVStoreError(f"{what} failed on the server: {name}: {message}")


class ChannelServer:
    """A server's listening socket and one thread per connection, with bounds.

    A connection first proves that it belongs to the job (:mod:`.auth`); until then not a
    byte of it is read as a frame, and a peer that fails or is late is closed without an
    answer. At most :data:`MAX_HANDSHAKES` connections may be proving themselves and
    :data:`MAX_CONNECTIONS` be open at once (more are closed as they arrive); a frame,
    once begun, must arrive within ``frame_timeout`` seconds; its header and body may be
    no larger than ``limits()`` says (derived from the keys the server holds), checked
    before anything is allocated. No exception ends the accept loop, and none escapes a
    connection's thread.

    Parameters
    ----------
    server : ParameterServer
        Whose ``push_values``/``pull_values`` requests run (and whose ``frame_limits()``
        bounds a request).
    host : str
        The address to bind (the host Ray is bound to: 127.0.0.1 for a local cluster).
    secret : str
        The job's secret (see :mod:`.auth`).
    frame_timeout : float
        Seconds a frame may take once its first bytes arrived.
    """

    def __init__(self, server: Any, host: str, secret: str, frame_timeout: float = 60.0):
        if not secret:
            raise KVStoreError("a data channel needs the job's secret (start the job with start_job)")
        self.server = server
        self.secret = secret
        self.frame_timeout = frame_timeout
        self.listener = socket.create_server((host, 0), backlog=BACKLOG)
        self.address = (host, self.listener.getsockname()[1])
        self._lock = threading.Lock()
        self.handshaking = 0
        self.open = 0
        #: seconds a new connection has to prove itself
        self.handshake_timeout = auth.HANDSHAKE_TIMEOUT
        threading.Thread(target=self._accept, name="mxkit-channel-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError as exc:
                if self.listener.fileno() == -1:  # closed
                    return
                if isinstance(exc, TimeoutError | InterruptedError | ConnectionAbortedError):
                    continue
                time.sleep(0.05)  # e.g. out of file descriptors: let connections end, then go on
                continue
            except Exception:  # nothing may end the accept loop
                time.sleep(0.05)
                continue
            try:
                self._admit(sock)
            except Exception:  # e.g. no thread could be started: drop this one, go on
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        with self._lock:
            if self.handshaking >= MAX_HANDSHAKES or self.open >= MAX_CONNECTIONS:
                sock.close()
                return
            self.handshaking += 1
            self.open += 1
        try:
            threading.Thread(target=self._serve, args=(sock,), name="mxkit-channel", daemon=True).start()
        except BaseException:
            self._release(handshaking=True)
            raise

    def _release(self, handshaking: bool) -> None:
        with self._lock:
            self.open -= 1
            if handshaking:
                self.handshaking -= 1

    def _serve(self, sock: socket.socket) -> None:
        handshaking = True
        try:
            with sock:
                try:
                    auth.challenge(sock, self.secret, self.handshake_timeout)
                except (OSError, auth.AuthenticationError):
                    return  # not of this job, or too slow: closed without a word
                with self._lock:
                    self.handshaking -= 1
                handshaking = False
                sock.settimeout(None)  # a worker may wait long between requests, not inside one
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._serve_frames(sock)
        except Exception:  # a thread's last resort (MemoryError included): the connection ends
            pass
        finally:
            self._release(handshaking)

    def _serve_frames(self, sock: socket.socket) -> None:
        session: dict[int, Any] = {}  # the batches this connection defined (at most batches.MAX_BATCHES)
        pool = BodyPool()
        while True:
            try:
                header, arrays = receive_frame(sock, within=self.frame_timeout, limits=self.server.frame_limits,
                                               pool=pool)
            except (EOFError, OSError):
                return
            except (ChannelError, MemoryError, RecursionError) as exc:  # the stream is lost: say why, close it
                if not isinstance(exc, ChannelError):
                    exc = ChannelError(f"the server could not read a frame ({type(exc).__name__})")
                try:
                    send_frame(sock, _error_header(exc), [])
                    _close_gracefully(sock)
                except OSError:
                    pass
                return
            try:
                if "batch" in header:
                    answer, values = handle_request(self.server, header, arrays, session)
                else:
                    answer, values = handle_request(self.server, header, arrays)
            except Exception as exc:  # every error goes back to the worker that asked
                answer, values = _error_header(exc), []
            del header, arrays
            try:
                send_frame(sock, answer, values)
            except OSError:
                return

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()


def _close_gracefully(sock: socket.socket, within: float = 1.0, most: int = 1 << 20) -> None:
    """End our side, then read what the peer still sends (up to ``most`` bytes, ``within``
    seconds) before the socket closes: closing with unread input makes the kernel reset the
    connection, and a reset can discard the error frame just sent before the peer reads it."""
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(within)
    deadline = time.monotonic() + within
    while most > 0 and time.monotonic() < deadline:
        chunk = sock.recv(min(most, 65536))
        if not chunk:
            return
        most -= len(chunk)


# -- the worker's side ---------------------------------------------------------------------


def _add_table(header: dict[str, Any], arrays: list[np.ndarray], name: str,
               pairs: list[tuple[tuple[Any, int], int]]) -> None:
    """Put the ``[(shard_id, round)]`` table ``name`` in a request: as the frame's next array
    when :func:`shard_table` can (int keys), else as JSON ``[[key, part, round], ...]``."""
    table = shard_table(pairs)
    if table is None:
        header[name] = [[shard[0], shard[1], r] for shard, r in pairs]
    else:
        header[f"{name}_array"] = True
        arrays.append(table)


class Pending:
    """A request sent on a :class:`Connection` whose answer is not read yet."""

    __slots__ = ("answer", "batch", "connection", "defines", "done", "error", "sent", "shapes", "what")

    def __init__(self, connection: Connection, what: str, shapes: list[tuple[int, ...]] | None = None):
        self.connection, self.what, self.shapes = connection, what, shapes
        self.done, self.answer, self.error = False, None, None
        #: whether its frame was written in full (an :class:`Outbox`'s requests are written at its flush)
        self.sent = False
        #: the batch a batched pull reads (a :class:`~.plans.ServerShare`), and the batch number it defines
        self.batch: Any = None
        self.defines: int | None = None

    @property
    def lost(self) -> bool:
        """Whether it failed because the connection dropped."""
        return isinstance(self.error, ChannelLost)

    def result(self) -> Any:
        """``(values, clocks)`` of a pull (``None`` for a push), waiting for it; raises its error."""
        if not self.sent and not self.done:
            raise KVStoreError(f"{self.what}: its answer was awaited before its request was sent (the Outbox it "
                               f"was queued in was not flushed)")
        while not self.done:
            self.connection.read_answer(self)
        if self.error is not None:
            raise self.error
        return self.answer


class Outbox:
    """Requests to several servers, written to their connections at the same time.

    A call that touches several servers queues its requests here (``outbox=`` of
    :meth:`Connection.push`, :meth:`~Connection.pull` and :meth:`~Connection.batch`), and
    :meth:`flush` writes them all at once (:func:`.frames.send_together`): a big push to one
    server does not wait until the server before it has read its share, and every server
    starts on its frames as they arrive. A connection's requests keep their order, and each
    joins its connection's waiting requests once its frame is written in full. Used as a
    context manager it flushes on exit, also when the block raised: the requests queued
    before the error are sent, as they were when requests were sent one by one.
    """

    __slots__ = ("_queued",)

    def __init__(self) -> None:
        self._queued: dict[tuple[int, int], tuple[Connection, Outgoing, list[Pending]]] = {}

    def queue(self, connection: Connection, sock: socket.socket, header: dict[str, Any], arrays: list[Any],
              pending: Pending) -> None:
        """Queue the frame of ``pending`` for ``connection`` (whose socket is ``sock``)."""
        entry = self._queued.get((id(connection), id(sock)))
        if entry is None:
            entry = self._queued[(id(connection), id(sock))] = (connection, Outgoing(sock), [])
        entry[1].add(header, arrays)
        entry[2].append(pending)

    def flush(self) -> None:
        """Write every queued frame, all connections at once.

        Raises
        ------
        ChannelLost
            If a connection dropped (or took nothing for its timeout) before its frames were
            written: its queued requests fail with it and the connection is closed; the other
            connections' frames are still written in full.
        """
        queued, self._queued = list(self._queued.values()), {}
        if not queued:
            return
        errors = send_together([outgoing for _, outgoing, _ in queued],
                               max(connection.timeout for connection, _, _ in queued))
        lost: ChannelLost | None = None
        for (connection, outgoing, pendings), error in zip(queued, errors):
            if error is None:
                connection._sent(pendings)
                continue
            if connection.sock is outgoing.sock:  # (half a frame may be on the wire: the stream is lost)
                connection._drop(error)
            for pending in pendings:
                pending.done, pending.error = True, connection._lost_at_send(pending, error)
            lost = lost or pendings[0].error
        if lost is not None:
            raise lost

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, kind: Any, exc: Any, traceback: Any) -> None:
        if kind is None:
            self.flush()
            return
        try:
            self.flush()
        except Exception:  # the block's own error is the one to raise (these requests failed too)
            pass


def results(pendings: list[Pending]) -> list[Any]:
    """The answers of ``pendings`` (:meth:`Pending.result` of each, in their order), read as
    they arrive: of requests to several servers, whichever server answers first is read
    first, so a server still waiting for other workers does not hold up reading the others.

    Raises the error of a failed request as soon as one has failed (of several, the first in
    ``pendings``); the others' answers are read later, in order, by whoever reads next.
    """
    while True:
        undone = []
        for pending in pendings:
            if pending.done:
                if pending.error is not None:
                    raise pending.error
            else:
                undone.append(pending)
        if not undone:
            return [pending.answer for pending in pendings]
        oldest = {}  # per connection, its first request still waiting
        for pending in undone:
            oldest.setdefault(id(pending.connection), pending)
        if len(oldest) == 1 or not all(pending.sent for pending in undone):
            undone[0].result()  # one server (or a request never sent: result says so)
        else:
            _read_first_ready(list(oldest.values()))


def _read_first_ready(awaited: list[Pending]) -> None:
    """Wait until one of the connections of ``awaited`` (one request each) has an answer
    coming, and read it."""
    poller = select.poll()
    by_fd: dict[int, Pending] = {}
    for pending in awaited:
        sock = pending.connection.sock
        fd = sock.fileno() if sock is not None else -1
        if fd < 0:  # closed by another reader meanwhile: its requests failed (read_answer sees it)
            pending.connection.read_answer(pending)
            return
        by_fd[fd] = pending
        poller.register(fd, select.POLLIN)
    timeout = max(pending.connection.timeout for pending in awaited)
    ready = poller.poll(max(1, int(timeout * 1000)))
    if not ready:
        first = awaited[0]
        raise first.connection.no_answer(first)
    for fd, _ in ready:
        pending = by_fd[fd]
        pending.connection.read_answer(pending)


class Connection:
    """A worker's connection to server ``index``, made on first use and after a drop.

    Parameters
    ----------
    index : int
        The server's number (for messages).
    resolve : callable
        ``resolve() -> (host, port)``: asks the server, through Ray, where it listens.
    timeout : float
        Seconds to wait for an answer (a pull blocked on other workers waits this long).
    secret : str
        The job's secret, to answer the server's challenge (:mod:`.auth`).
    """

    def __init__(self, index: int, resolve: Callable[[], tuple[str, int]], timeout: float, secret: str):
        self.index, self.resolve, self.timeout, self.secret = index, resolve, timeout, secret
        self.sock: socket.socket | None = None
        self.address: tuple[str, int] | None = None
        self.waiting: deque[Pending] = deque()
        #: the batches this connection has defined on the server, by number (they end with it)
        self.defined: dict[int, Any] = {}
        #: held while reading an answer: the store's receiver thread and its caller's thread
        #: may both read answers (each answer goes to the oldest waiting request, whoever reads)
        self.reading = threading.Lock()
        #: the answers' bodies, received into again once their values are copied out
        self.bodies = BodyPool()

    def _connect(self) -> socket.socket:
        self.address = tuple(self.resolve())  # an ActorLost if the server is dead
        try:
            sock = socket.create_connection(self.address, timeout=self.timeout)
        except OSError as exc:
            raise ChannelLost(f"server {self.index}: cannot connect to its data channel at "
                              f"{self.address[0]}:{self.address[1]} ({exc})") from None
        try:
            auth.respond(sock, self.secret)
        except auth.AuthenticationError as exc:
            sock.close()
            if "refused" in str(exc):
                raise KVStoreError(f"server {self.index} at {self.address[0]}:{self.address[1]}: {exc}") from None
            # closed before its challenge: the server is busy (connection limit) or restarting
            raise ChannelLost(f"server {self.index}: its data channel at {self.address[0]}:{self.address[1]} closed "
                              f"the connection ({exc}); the server is busy (at its connection limit), restarting "
                              f"or dead") from None
        except OSError as exc:
            sock.close()
            raise ChannelLost(f"server {self.index}: no handshake with its data channel at {self.address[0]}:"
                              f"{self.address[1]} ({exc}); the server died or is restarting") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        return sock

    def connect_early(self) -> None:
        """Open the connection now if it is not open, or leave that to the first request when
        it cannot be (that request then raises what went wrong): a store connects when its
        keys are initialised, so a training loop's first step does not also ask Ray where the
        server listens and prove that it belongs to the job."""
        if self.sock is None:
            try:
                self._connect()
            except KVStoreError:
                pass

    def request(self, header: dict[str, Any], arrays: list[np.ndarray], what: str,
                shapes: list[tuple[int, ...]] | None = None, outbox: Outbox | None = None) -> Pending:
        """Send a request, or queue it in ``outbox`` (sent with the outbox's other requests);
        its answer is read by :meth:`Pending.result` (``shapes``: those of the values a pull
        answers with, when the server may pack them)."""
        sock = self.sock or self._connect()
        pending = Pending(self, f"{what} (server {self.index})", shapes)
        if outbox is not None:
            outbox.queue(self, sock, header, arrays, pending)
            return pending
        try:
            send_frame(sock, header, arrays)
        except OSError as exc:
            self._drop(exc)
            raise self._lost_at_send(pending, exc) from None
        self._sent([pending])
        return pending

    def _sent(self, pendings: list[Pending]) -> None:
        """The frames of ``pendings`` are written: their answers are the next to come."""
        for pending in pendings:
            pending.sent = True
        self.waiting.extend(pendings)

    def _lost_at_send(self, pending: Pending, exc: BaseException) -> ChannelLost:
        return ChannelLost(f"{pending.what}: the connection to {self._where()} dropped ({exc})")

    def push(self, rank: int, epoch: int, rounds: list[Any], payloads: list[Any], resend: bool = False,
             outbox: Outbox | None = None) -> Pending:
        """Send ``payloads`` as the ``(shard_id, round)`` pushes ``rounds`` (small values packed:
        the server knows each part's size); queued in ``outbox`` when given."""
        layout, groups, arrays = wire.flatten(payloads)
        header = {"op": "push", "rank": rank, "epoch": epoch, "resend": resend, "values": layout, "packed": groups}
        _add_table(header, arrays, "rounds", rounds)
        return self.request(header, arrays, "push", outbox=outbox)

    def pull(self, rank: int, epoch: int, items: list[Any], timeout: float, rounds: list[Any] = (),
             payloads: list[Any] = (), shapes: list[tuple[int, ...]] | None = None,
             outbox: Outbox | None = None) -> Pending:
        """Ask for the values of ``items`` (``(shard_id, rounds pushed)``), sending the pushes
        ``rounds``/``payloads`` first in the same frame. With ``shapes`` (each value's shape),
        the server packs small values in its answer; without, each travels with its shape.
        Queued in ``outbox`` when given."""
        header: dict[str, Any] = {"op": "pull", "rank": rank, "epoch": epoch, "timeout": timeout}
        if shapes is not None:
            if len(shapes) != len(items):
                raise KVStoreError(f"pull of {len(items)} items with {len(shapes)} shapes")
            header["pack"] = True
        arrays: list[np.ndarray] = []
        if rounds:
            layout, groups, arrays = wire.flatten(payloads)
            header.update(op="pushpull", values=layout, packed=groups)
            _add_table(header, arrays, "rounds", rounds)
        _add_table(header, arrays, "items", items)  # last: the server takes it off first
        return self.request(header, arrays, "pull", shapes, outbox)

    def batch(self, rank: int, epoch: int, share: Any, values: Any = None, rounds: np.ndarray | None = None,
              pulled: np.ndarray | None = None, timeout: float | None = None, outbox: Outbox | None = None
              ) -> Pending:
        """Send a batched request of ``share`` (a :class:`~.plans.ServerShare`): a push of
        ``values`` (its flat array, or :class:`~.frames.Gathered` pieces) as ``rounds``, a
        pull of the rounds ``pulled``, or both (queued in ``outbox`` when given). The batch is
        defined on first use."""
        push, pull = values is not None, pulled is not None
        header: dict[str, Any] = {"op": "pushpull" if push and pull else "push" if push else "pull", "rank": rank,
                                  "epoch": epoch, "batch": share.number}
        arrays: list[Any] = [values, rounds] if push else []
        if pull:
            header["timeout"] = timeout
            arrays.append(pulled)
        # (a number given to another share since, when the worker's plans started afresh, is defined again)
        defines = self.defined.get(share.number) is not share or self.sock is None
        if defines:
            header["define"] = share.define
        pending = self.request(header, arrays, "pull" if pull else "push", outbox=outbox)
        if defines:
            self.defined[share.number] = share
            pending.defines = share.number
        if pull:
            pending.batch = share
        return pending

    def _where(self) -> str:
        return f"server {self.index}" + (f" at {self.address[0]}:{self.address[1]}" if self.address else "")

    def read_answer(self, awaited: Pending | None = None) -> None:
        """Read the answer of the oldest waiting request (nothing when ``awaited`` is done:
        another thread read its answer while this one waited to read)."""
        with self.reading:
            if (awaited is not None and awaited.done) or not self.waiting:
                return
            self._read_answer()

    def _read_answer(self) -> None:
        pending = self.waiting[0]
        try:
            header, arrays = receive_frame(self.sock, pool=self.bodies)
        except TimeoutError:
            raise self.no_answer(pending) from None
        except (EOFError, OSError, ChannelError) as exc:
            self._drop(exc)
            return
        if header.get("ok") is True and header.get("batch") is True:
            try:
                answer = _batch_answer(pending, arrays)
            except ChannelError as exc:
                self._drop(exc)
                return
            self.waiting.popleft()
            pending.done, pending.answer = True, answer
            return
        clocks = header.get("clocks")
        if header.get("ok") is True and header.get("clocks_array") is True:
            try:
                if not arrays:
                    raise ChannelError(f"{pending.what}: the answer has no clocks array")
                clocks = _table_rows(arrays[-1], "clocks", 2)
                arrays = arrays[:-1]
            except ChannelError as exc:
                self._drop(exc)
                return
        if header.get("ok") is True and "values" in header:
            shapes = pending.shapes
            try:
                if shapes is None or not isinstance(header["values"], list) or len(header["values"]) != len(shapes):
                    raise ChannelError(f"{pending.what}: the server packed an answer this side did not ask for")
                arrays = wire.unflatten(header["values"], header.get("packed"), arrays, shapes.__getitem__)
            except ChannelError as exc:
                self._drop(exc)
                return
        self.waiting.popleft()
        pending.done = True
        if header.get("ok") is True:
            pending.answer = None if clocks is None else (arrays, [tuple(clock) for clock in clocks])
        else:
            pending.error = error_from(header, pending.what)
            if pending.defines is not None:  # the server did not keep the batch it could not define
                self.defined.pop(pending.defines, None)

    def no_answer(self, pending: Pending) -> KVStoreError:
        """Give up on the connection after ``pending`` waited ``timeout`` seconds for its answer:
        the error to raise."""
        self._drop(None)  # the stream's position is unknown now: start afresh
        return KVStoreError(f"{pending.what}: no answer from {self._where()} within {self.timeout} s; it may be "
                            f"overloaded or stuck (raise config kvstore_timeout if it is only slow)")

    def _drop(self, exc: BaseException | None) -> None:
        """Close the connection; every waiting request fails with :class:`ChannelLost`."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.defined = {}  # the server's batches of this connection end with it
        waiting, self.waiting = self.waiting, deque()
        for pending in waiting:
            pending.done = True
            pending.error = ChannelLost(f"{pending.what}: the connection to {self._where()} dropped "
                                        f"({exc or 'timed out'}); the server died or is restarting")

    def poll(self) -> None:
        """Read the answers that have arrived, without waiting."""
        while True:
            sock = self.sock
            if not self.waiting or sock is None:
                return
            try:
                if not select.select([sock], [], [], 0)[0]:
                    return
            except (OSError, ValueError):  # closed by the other reading thread meanwhile
                return
            self.read_answer()

    def close(self) -> None:
        """Close the connection (requests still waiting fail)."""
        self._drop(None)


def _batch_answer(pending: Pending, arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat values, clocks)`` of a batched pull's answer, checked against what was asked."""
    share = pending.batch
    if share is None:
        raise ChannelError(f"{pending.what}: the server answered with a batch this side did not ask for")
    if len(arrays) != 2:
        raise ChannelError(f"{pending.what}: a batched answer carries 2 arrays, got {len(arrays)}")
    flat, clocks = arrays
    if flat.ndim != 1 or flat.dtype != share.dtype or flat.size != share.total:
        raise ChannelError(f"{pending.what}: the answer's values are {flat.size} elements of {flat.dtype}; the "
                           f"batch holds {share.total} of {share.dtype}")
    if clocks.dtype != TABLE_DTYPE or clocks.shape != (share.count, 2) or (clocks.size and clocks.min() < 0):
        raise ChannelError(f"{pending.what}: the answer's clocks are not {share.count} pairs of int64 >= 0")
    return flat, clocks


def check_done(pendings: list[Pending]) -> list[Pending]:
    """Raise the error of any finished request in ``pendings``; return those still waiting."""
    for connection in {id(p.connection): p.connection for p in pendings}.values():
        connection.poll()
    running = []
    for pending in pendings:
        if not pending.done:
            running.append(pending)
        elif pending.error is not None:
            raise pending.error
    return running


__all__ = ["ChannelLost", "ChannelServer", "Connection", "Outbox", "Pending", "TABLE_DTYPE", "check_done",
           "error_from", "handle_batch", "handle_request", "results", "shard_table"]
