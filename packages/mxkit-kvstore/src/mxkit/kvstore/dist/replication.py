"""Chain replication of a server's shards on the next server of the ring.

After a server applies a round (or ends an epoch, or stores a new key), the request's
thread sends the changed shards (value, round clocks, optimizer state) to the backup and
waits for its acknowledgement before answering; a pull waits until what it reads is on the
backup, because the worker then forgets its pushes. No table lock is held while waiting,
so two servers that back each other up cannot deadlock.

When Ray restarts a dead server (``max_restarts``), its ``__init__`` calls :func:`recover`:
the settings (consistency model, optimizer, compression), shards and epoch state come back
from the backup, and the replicas it kept for its predecessor are rebuilt from that
predecessor. Rounds that were pending (not every worker's push merged yet) died with the
server: the workers resend their unconfirmed pushes (``push(resend=True)``) when a call to
the server fails, and the server skips the rounds it already holds.
"""

from __future__ import annotations

import time
from typing import Any

from mxkit.core.errors import KVStoreError

#: seconds a server keeps trying to reach a backup that is restarting
BACKUP_WAIT = 60.0


def neighbour(server: Any, offset: int) -> Any:
    """The actor of the server ``offset`` places round the ring from ``server``."""
    import ray

    from mxkit.kvstore.dist.job import server_name

    index = (server.index + offset) % server.num_servers
    cache = server.__dict__.setdefault("_neighbours", {})
    if index not in cache:  # a named actor's handle stays valid across its restarts
        cache[index] = ray.get_actor(server_name(index), namespace=server.namespace)
    return cache[index]


def _call(make_call: Any, what: str) -> Any:
    """Call a neighbour, retrying while it restarts."""
    import ray
    from ray import exceptions

    deadline = time.monotonic() + BACKUP_WAIT
    while True:
        try:
            return ray.get(make_call(), timeout=BACKUP_WAIT)
        except (exceptions.RayActorError, ValueError) as exc:  # dead, restarting, or not registered yet
            if time.monotonic() > deadline:
                raise KVStoreError(f"{what}: the neighbouring server did not come back within {BACKUP_WAIT} s "
                                   f"({exc})") from None
            time.sleep(0.05)


def forward(server: Any, meta_changed: bool) -> None:
    """Send ``server``'s changed shards to its backup and mark them replicated."""
    snapshots = server.table.take_changes()
    if not snapshots and not meta_changed:
        return
    snapshots = server._with_states(snapshots)
    meta = server.table.meta()
    _call(lambda: neighbour(server, 1).replicate.remote(server.index, snapshots, meta),
          f"replicating server {server.index}'s shards")
    server.table.mark_replicated({tuple(snap["id"]): snap["version"] for snap in snapshots})


def recover(server: Any) -> None:
    """Rebuild a restarted ``server`` from its backup and its predecessor."""
    settings, snapshots, meta = _call(lambda: neighbour(server, 1).replica_of.remote(server.index),
                                      f"recovering server {server.index}")
    server._apply_settings(settings)
    server.table.restore(snapshots, meta)
    server._restore_states(snapshots)
    predecessor = (server.index - 1) % server.num_servers
    kept, kept_meta = _call(lambda: neighbour(server, -1).primary_snapshot.remote(),
                            f"rebuilding server {server.index}'s replicas of server {predecessor}")
    server._replicas.keep(predecessor, kept, kept_meta)


__all__ = ["BACKUP_WAIT", "forward", "neighbour", "recover"]
