"""The data channel's frames: a fixed binary prefix, a JSON header and raw array bytes.

A frame is::

    prefix   20 bytes  b"MXKV", version (u16), flags (u16, 0), header bytes (u32), body bytes (u64)
    header   UTF-8 JSON object; its "arrays" lists [dtype.str, shape] of each array of the body
    body     the arrays' bytes, C order, each starting at a multiple of 16 bytes

Only numbers, strings and lists cross the channel besides raw numeric bytes: nothing is
unpickled, and every field of a received frame is checked (:class:`ChannelError` names
what was wrong) before memory is allocated for its body.
"""

from __future__ import annotations

import errno
import json
import select
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError

MAGIC = b"MXKV"
VERSION = 1
PREFIX = struct.Struct("!4sHHIQ")
#: the most JSON one frame may carry (a 100k-key request is about 3 MiB)
MAX_HEADER_BYTES = 64 << 20
#: the most array bytes one frame may carry
MAX_BODY_BYTES = 1 << 40
#: each array of a body starts at a multiple of this (numpy views stay aligned)
ALIGN = 16
#: numpy kinds that may cross: bool, signed/unsigned ints, floats, complex
ALLOWED_KINDS = "biufc"
#: frame bodies of this size range are received into memory used again (:class:`BodyPool`)
POOLED_MIN_BYTES = 256 << 10
POOLED_MAX_BYTES = 16 << 20
#: buffers per sendmsg call (below every platform's IOV_MAX)
IOV_CHUNK = 512
_PADDING = bytes(ALIGN)


class ChannelError(KVStoreError):
    """A frame on the data channel was malformed or truncated."""


class BodyPool:
    """One connection's frame bodies, received into again once nothing holds them.

    A fresh body of megabytes is fresh memory: the kernel faults in and zeroes every page
    as the bytes arrive (a sixth of a worker's time moving 4 MiB values). A body is used
    again only when the pool's reference is the last one: no array of the frame (a view
    keeps its body alive), no value a server stores from it, no answer being copied out.
    Bodies from :data:`POOLED_MIN_BYTES` to :data:`POOLED_MAX_BYTES` are kept, at most
    ``keep`` of them (the oldest is let go), so a connection holds at most that much more.
    Not thread-safe: a connection reads its frames one at a time.
    """

    __slots__ = ("bodies", "keep")

    def __init__(self, keep: int = 2):
        self.keep = keep
        self.bodies: list[np.ndarray] = []

    def take(self, nbytes: int) -> np.ndarray:
        """An unused body of ``nbytes`` (uint8): a kept one that nothing else holds, or a new one."""
        if not POOLED_MIN_BYTES <= nbytes <= POOLED_MAX_BYTES:
            return np.empty(nbytes, dtype=np.uint8)
        bodies = self.bodies
        for index in range(len(bodies)):
            # the list's reference and getrefcount's argument: nothing else holds it
            if bodies[index].nbytes == nbytes and sys.getrefcount(bodies[index]) == 2:
                return bodies[index]
        body = np.empty(nbytes, dtype=np.uint8)
        if len(bodies) >= self.keep:
            del bodies[0]
        bodies.append(body)
        return body


def _aligned(size: int) -> int:
    return (size + ALIGN - 1) // ALIGN * ALIGN


class Gathered:
    """Pieces of one dtype that travel as one 1-D array of a frame, sent one after another
    from where they are (``sendmsg`` gathers them): the receiver gets one contiguous array
    and the sender copies nothing.

    Parameters
    ----------
    pieces : list of numpy.ndarray
        C-contiguous arrays of ``dtype`` (any shapes: each is sent flat).
    dtype : numpy.dtype
    """

    __slots__ = ("dtype", "nbytes", "pieces", "shape")

    def __init__(self, pieces: list[np.ndarray], dtype: Any):
        self.dtype = np.dtype(dtype)
        self.pieces = [np.ascontiguousarray(piece) for piece in pieces]
        for piece in self.pieces:
            if piece.dtype != self.dtype:
                raise KVStoreError(f"gathered pieces must all be {self.dtype}, got {piece.dtype}")
        size = sum(piece.size for piece in self.pieces)
        self.shape = (size,)
        self.nbytes = size * self.dtype.itemsize


def encode(header: dict[str, Any], arrays: list[Any]) -> list[Any]:
    """The buffers of a frame with ``header`` (a JSON-able dict) and ``arrays`` (numpy
    arrays, or :class:`Gathered` pieces that travel as one array).

    The arrays are not copied unless they are not C-contiguous.
    """
    # (ascontiguousarray makes 0-d 1-d)
    arrays = [array if type(array) is Gathered else np.asarray(array, order="C") for array in arrays]
    header = dict(header, arrays=[[array.dtype.str, list(array.shape)] for array in arrays])
    head = json.dumps(header, separators=(",", ":")).encode()
    buffers: list[Any] = [b"", head]
    body = 0
    for array in arrays:
        if body % ALIGN:
            pad = ALIGN - body % ALIGN
            buffers.append(_PADDING[:pad])
            body += pad
        if array.nbytes:
            if type(array) is Gathered:
                buffers.extend(memoryview(piece.reshape(-1).view(np.uint8)) for piece in array.pieces if piece.size)
            else:
                buffers.append(memoryview(array.reshape(-1).view(np.uint8)))
            body += array.nbytes
    buffers[0] = PREFIX.pack(MAGIC, VERSION, 0, len(head), body)
    return buffers


class Outgoing:
    """Frames still to be written to one socket: their buffers, and how far the writing got
    (a partial send is resumed where it stopped)."""

    __slots__ = ("first", "sock", "views")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.views: list[memoryview] = []
        self.first = 0  # the first view not yet written in full

    def add(self, header: dict[str, Any], arrays: list[Any]) -> None:
        """Queue one frame (:func:`encode`) after those queued before it."""
        self.views.extend(view for view in map(memoryview, encode(header, arrays)) if view.nbytes)

    @property
    def done(self) -> bool:
        """Whether every queued byte is written."""
        return self.first >= len(self.views)

    def send_some(self) -> None:
        """One ``sendmsg`` of what is left: what the socket takes now, or, when it takes
        nothing yet, what it takes once it can (waiting up to the socket's timeout)."""
        views, first = self.views, self.first
        sent = self.sock.sendmsg(views[first:first + IOV_CHUNK])
        while sent:
            size = views[first].nbytes
            if sent >= size:
                sent -= size
                first += 1
            else:
                views[first] = views[first][sent:]
                sent = 0
        self.first = first


def send_frame(sock: socket.socket, header: dict[str, Any], arrays: list[Any]) -> None:
    """Send one frame (``sendmsg`` of the buffers themselves, partial sends resumed)."""
    outgoing = Outgoing(sock)
    outgoing.add(header, arrays)
    while not outgoing.done:
        outgoing.send_some()


def send_together(outgoing: list[Outgoing], timeout: float | None) -> list[OSError | None]:
    """Write each :class:`Outgoing` to its socket, all at the same time; per item, the error
    that ended its writing (None: written in full).

    Each socket is given what it takes whenever it can take more, so a peer that reads
    slowly (a busy server) holds up only its own frames: the others are written meanwhile,
    and their peers work on them. A socket that fails (or takes nothing for ``timeout``
    seconds) stops only its own writing; the others' frames are still written in full, so
    no stream is left with half a frame.
    """
    errors: list[OSError | None] = [None] * len(outgoing)
    left = [index for index, item in enumerate(outgoing) if not item.done]
    if len(left) == 1:  # one socket: its own waits are the right ones
        item = outgoing[left[0]]
        try:
            while not item.done:
                item.send_some()
        except OSError as exc:
            errors[left[0]] = exc
        return errors
    if not left:
        return errors
    poller = select.poll()
    by_fd = {}
    for index in left:
        fd = outgoing[index].sock.fileno()
        if fd < 0:
            errors[index] = OSError(errno.EBADF, "the socket is closed")
            continue
        by_fd[fd] = index
        poller.register(fd, select.POLLOUT)
    wait_ms = None if timeout is None else max(1, int(timeout * 1000))
    while by_fd:
        ready = poller.poll(wait_ms)
        if not ready:  # no socket took a byte within the timeout
            for index in by_fd.values():
                errors[index] = TimeoutError(f"the peer took no bytes within {timeout} s")
            break
        for fd, _ in ready:
            index = by_fd[fd]
            item = outgoing[index]
            try:
                item.send_some()  # (it can take bytes now: this does not wait)
            except OSError as exc:
                errors[index] = exc
            if errors[index] is not None or item.done:
                poller.unregister(fd)
                del by_fd[fd]
    return errors


def _receive_into(sock: socket.socket, view: memoryview, what: str, within: float | None = None) -> None:
    """Fill ``view``; with ``within``, the socket's timeout becomes ``within`` once the first
    bytes arrived (a peer may wait long between frames, not inside one)."""
    received = 0
    while received < view.nbytes:
        count = sock.recv_into(view[received:])
        if count == 0:
            if received == 0 and what == "prefix":
                raise EOFError("the peer closed the connection")
            raise ChannelError(f"truncated frame: the connection closed after {received} of the {view.nbytes} "
                               f"bytes of the frame's {what}")
        if received == 0 and within is not None:
            sock.settimeout(within)
        received += count


def _receive_growing(sock: socket.socket, size: int, what: str) -> bytearray:
    """``size`` bytes, the buffer grown as they arrive (a size claimed by a peer is not
    allocated before the bytes are there)."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ChannelError(f"truncated frame: the connection closed after {len(data)} of the {size} bytes of "
                               f"the frame's {what}")
        data += chunk
    return data


def _check_array_specs(specs: Any, max_body: int = MAX_BODY_BYTES
                       ) -> list[tuple[np.dtype, tuple[int, ...], int, int]]:
    """``[(dtype, shape, offset, bytes)]`` of a header's "arrays", and their checks."""
    if not isinstance(specs, list):
        raise ChannelError(f"malformed frame: 'arrays' must be a list of [dtype, shape], got {specs!r:.200}")
    layout = []
    offset = 0
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], list)):
            raise ChannelError(f"malformed frame: an array is described by [dtype, shape], got {spec!r:.200}")
        try:
            dtype = np.dtype(spec[0])
        except TypeError:
            raise ChannelError(f"malformed frame: unknown dtype {spec[0]!r:.50}") from None
        if dtype.kind not in ALLOWED_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise ChannelError(f"malformed frame: dtype {spec[0]!r:.50} cannot cross the data channel; it carries "
                               f"bool, int, uint, float and complex arrays only")
        shape = spec[1]
        if len(shape) > 32 or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**48
                                      for n in shape):
            raise ChannelError(f"malformed frame: a shape is a list of at most 32 ints >= 0, got {shape!r:.200}")
        offset = _aligned(offset)
        size = dtype.itemsize
        for n in shape:
            size *= n
        layout.append((dtype, tuple(shape), offset, size))
        offset += size
        if offset > max_body:
            raise ChannelError(f"frame too large: its arrays add up to more than {max_body} bytes, the most this "
                               f"side accepts")
    return layout


def receive_frame(sock: socket.socket, max_header: int = MAX_HEADER_BYTES, max_body: int = MAX_BODY_BYTES,
                  within: float | None = None, limits: Callable[[], tuple[int, int]] | None = None,
                  pool: BodyPool | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Read one frame: its header and its arrays (views of one buffer that nothing else uses).

    Parameters
    ----------
    sock : socket.socket
        The connection (its timeout applies while waiting for the frame to begin).
    max_header, max_body : int
        The most header and body bytes accepted: a larger claim fails before anything is
        allocated for it.
    within : float, optional
        Seconds the rest of the frame may take once its first bytes arrived.
    limits : callable, optional
        ``limits() -> (max_header, max_body)``, asked once the frame's prefix has arrived
        (a server's limits grow with the keys it holds, perhaps while it waited); it
        replaces ``max_header`` and ``max_body``.
    pool : BodyPool, optional
        The connection's bodies to receive into (a fresh buffer without it).

    Raises
    ------
    EOFError
        If the peer closed the connection between frames.
    ChannelError
        If the frame is malformed, truncated or over the limits.
    OSError
        On a socket error or timeout.
    """
    idle = sock.gettimeout()
    prefix = bytearray(PREFIX.size)
    _receive_into(sock, memoryview(prefix), "prefix", within)
    try:
        if limits is not None:
            max_header, max_body = limits()
        magic, version, flags, header_bytes, body_bytes = PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise ChannelError(f"malformed frame: it starts with {bytes(prefix[:4])!r}, not {MAGIC!r} (is the peer "
                               f"an mxkit KVStore worker or server?)")
        if version != VERSION or flags != 0:
            raise ChannelError(f"frame version {version} (flags {flags}); this side speaks version {VERSION}, flags 0")
        if header_bytes > max_header:
            raise ChannelError(f"frame too large: a header of {header_bytes} bytes (this side accepts at most "
                               f"{max_header})")
        if body_bytes > max_body:
            raise ChannelError(f"frame too large: a body of {body_bytes} bytes (this side accepts at most {max_body})")
        head = _receive_growing(sock, header_bytes, "header")
        try:
            header = json.loads(head.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise ChannelError(f"malformed frame: its header is not UTF-8 JSON ({exc})") from None
        except RecursionError:
            raise ChannelError("malformed frame: its header nests JSON too deeply") from None
        if not isinstance(header, dict):
            raise ChannelError(f"malformed frame: its header is a JSON object, got {type(header).__name__}")
        layout = _check_array_specs(header.get("arrays", []), max_body)
        expected = layout[-1][2] + layout[-1][3] if layout else 0
        if body_bytes != expected:
            raise ChannelError(f"malformed frame: its body has {body_bytes} bytes, its arrays need {expected}")
        body = pool.take(body_bytes) if pool is not None else np.empty(body_bytes, dtype=np.uint8)
        _receive_into(sock, memoryview(body), "body")
    finally:
        if within is not None:
            sock.settimeout(idle)
    arrays = [body[offset:offset + size].view(dtype).reshape(shape) for dtype, shape, offset, size in layout]
    return header, arrays


__all__ = ["ALLOWED_KINDS", "BodyPool", "ChannelError", "Gathered", "MAGIC", "Outgoing", "VERSION", "encode", "receive_frame",
           "send_frame", "send_together"]
