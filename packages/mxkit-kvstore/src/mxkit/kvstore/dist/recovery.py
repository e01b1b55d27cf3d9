"""Surviving a server restart: unconfirmed pushes sent again, calls asked again.

With a replicated job (``start_job(..., replicate=True)``) a worker keeps each push until a
pull of its key returns (the servers then hold it, replicated). When a call fails because
a server died, or a restarted server asks for pushes it lost (:class:`ResendRequest`), the
worker waits for the server to answer again (Ray restarts it and it recovers from its
backup), sends its unconfirmed pushes again (the servers skip rounds they hold) and asks
again; without replication the error is raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist import channel, remote, wire
from mxkit.kvstore.dist.rounds import ResendRequest


def check_pushes(store: Any) -> None:
    """Raise the errors of finished pushes; a lost server of a replicated job is recovered."""
    try:
        store._in_flight = channel.check_done(store._in_flight)
    except remote.ActorLost:
        if not store._replicated:
            raise
        store._in_flight = []
        recover(store)


def ask(store: Any, send: Callable[[], list[Any]], what: str) -> list[Any]:
    """Wait for the calls ``send()`` makes; with replicated servers, a server lost on the way
    is waited for (Ray restarts it), given this worker's unconfirmed pushes and asked again."""
    deadline = time.monotonic() + store._timeout
    while True:
        try:
            return store._wait_all(send(), what)
        except (remote.ActorLost, ResendRequest):
            if not store._replicated or time.monotonic() > deadline:
                raise
            recover(store)


def recover(store: Any) -> None:
    """Send every unconfirmed push again, to servers that answer (restarted ones skip
    nothing, the others skip what they hold)."""
    import ray

    # requests lost with a connection are answered by this resend (pushes) or asked again (pulls)
    store._in_flight = [pending for pending in store._in_flight if not pending.lost]
    deadline = time.monotonic() + store._timeout
    for index, server in enumerate(store._servers):
        while True:  # wait until the server answers again
            try:
                ray.get(server.ping.remote(), timeout=max(0.1, deadline - time.monotonic()))
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    raise KVStoreError(f"server {index} did not come back within {store._timeout} s after it "
                                       f"died; raise max_restarts of the job or check the servers' logs") from None
                time.sleep(0.05)
        pending = store._unconfirmed.get(index)
        if pending:
            rounds = [(shard_id, round_index) for shard_id, sent in pending.items() for round_index, _ in sent]
            values = [payload for sent in pending.values() for _, payload in sent]
            store._wait_all([server.push.remote(store._rank, store._epoch, rounds, wire.pack(values), True)],
                            "resending pushes")


def confirm(store: Any, checked: list[tuple[Any, list[Any]]]) -> None:
    """A pull of these keys returned: the servers hold (and replicated) their pushes."""
    for entry, _ in checked:
        for part in entry.parts:
            store._unconfirmed.get(part.server, {}).pop((entry.key, part.index), None)


__all__ = ["ask", "check_pushes", "confirm", "recover"]
