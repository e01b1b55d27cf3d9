"""Who may use a server's data channel: a challenge-response on a per-job secret.

Every job has a random secret (:func:`new_secret`, made by
:func:`~mxkit.kvstore.dist.job.start_job`, i.e. by ``mxkit launch``). The servers get it
as an actor argument and the workers from the coordinator when they join, both through
Ray's control plane, which already authenticates every process of the cluster (Ray's
cluster token): whoever may call the job's actors may also send it data, nobody else.

The handshake, before the server reads a single byte of a frame::

    server -> peer   CHALLENGE_MAGIC (4 bytes) + a fresh random nonce (32 bytes)
    peer -> server   PROOF_MAGIC (4 bytes) + HMAC-SHA256(secret, CONTEXT + nonce) (32 bytes)
    server -> peer   ACCEPTED (4 bytes), or the connection is closed

The proof has a fixed size, so nothing the peer sends is interpreted as a length; the
server compares it in constant time (:func:`hmac.compare_digest`). The nonce is new for
every connection, so a proof recorded from another connection (a replay) does not match.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket

CHALLENGE_MAGIC = b"MXKC"
PROOF_MAGIC = b"MXKP"
ACCEPTED = b"MXOK"
NONCE_BYTES = 32
#: what the HMAC covers besides the nonce (a proof for anything else never matches)
CONTEXT = b"mxkit-kvstore-data-channel-v1\x00"
CHALLENGE_BYTES = len(CHALLENGE_MAGIC) + NONCE_BYTES
PROOF_BYTES = len(PROOF_MAGIC) + hashlib.sha256().digest_size
#: seconds a new connection has to prove itself before the server closes it
HANDSHAKE_TIMEOUT = 10.0


class AuthenticationError(ConnectionError):
    """The peer did not prove that it belongs to the job (or the server refused us)."""


def new_secret() -> str:
    """A fresh job secret (256 random bits, hex)."""
    return secrets.token_hex(32)


def proof(secret: str, nonce: bytes) -> bytes:
    """The HMAC of ``nonce`` under ``secret`` (what a peer sends back)."""
    return hmac.new(secret.encode(), CONTEXT + nonce, hashlib.sha256).digest()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise AuthenticationError(f"the peer closed the connection during the handshake "
                                      f"({len(data)} of {size} bytes)")
        data += chunk
    return bytes(data)


def challenge(sock: socket.socket, secret: str, timeout: float = HANDSHAKE_TIMEOUT) -> None:
    """The server's side: send a nonce, check the proof; raise if it is wrong or late.

    Raises
    ------
    AuthenticationError
        If the proof is missing, malformed or wrong.
    OSError
        On a socket error, or if the peer does not answer within ``timeout`` seconds.
    """
    sock.settimeout(timeout)
    nonce = secrets.token_bytes(NONCE_BYTES)
    sock.sendall(CHALLENGE_MAGIC + nonce)
    answer = _read_exactly(sock, PROOF_BYTES)
    expected = PROOF_MAGIC + proof(secret, nonce)
    if not hmac.compare_digest(answer, expected):
        raise AuthenticationError("the peer's proof does not match this job's secret")
    sock.sendall(ACCEPTED)


def respond(sock: socket.socket, secret: str) -> None:
    """The worker's side: answer the server's challenge (with the socket's own timeout).

    Raises
    ------
    AuthenticationError
        If the server does not speak this protocol or refuses the proof (another job's
        server at that address, or a different secret).
    OSError
        On a socket error or timeout.
    """
    greeting = _read_exactly(sock, CHALLENGE_BYTES)
    if not greeting.startswith(CHALLENGE_MAGIC):
        raise AuthenticationError(f"the server did not send an mxkit challenge (it sent {greeting[:4]!r})")
    sock.sendall(PROOF_MAGIC + proof(secret, greeting[len(CHALLENGE_MAGIC):]))
    try:
        answer = _read_exactly(sock, len(ACCEPTED))
    except AuthenticationError:
        raise AuthenticationError("the server refused this worker's proof: it belongs to another job, or the "
                                  "job's secret differs") from None
    if answer != ACCEPTED:
        raise AuthenticationError(f"the server answered the proof with {answer!r}, not {ACCEPTED!r}")


__all__ = ["AuthenticationError", "HANDSHAKE_TIMEOUT", "challenge", "new_secret", "proof", "respond"]
