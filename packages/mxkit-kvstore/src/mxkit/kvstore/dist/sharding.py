"""Which server holds what: small keys by consistent hashing, big arrays split across all.

As MXNet's ``KVStoreDist``: an array with at least config ``kvstore_bigarray_bound``
elements is cut into one equal contiguous part per server (part ``i`` on server ``i``), so
every server carries an equal share of the traffic of the big layers; a smaller key lives
whole on one server, chosen on a hash ring (each server at :data:`VIRTUAL_NODES` points),
so that adding or losing a server moves only the keys of the ring arcs next to it.
A key's backup (chain replication) is the next server round the ring.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from typing import Any

from mxkit.core.errors import KVStoreError

#: points per server on the hash ring (more points: a more even share of keys)
VIRTUAL_NODES = 64


@dataclass(frozen=True)
class Part:
    """One contiguous part of a key's flattened value, and the server that owns it.

    ``start:stop`` indexes the flattened value; a whole small key has ``whole=True`` and
    keeps its shape on the server.
    """

    server: int
    index: int
    start: int
    stop: int
    whole: bool

    @property
    def size(self) -> int:
        """Elements in this part."""
        return self.stop - self.start


def _point(text: str) -> int:
    # a stable hash (Python's hash() of a str changes per process)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def key_token(key: Any) -> str:
    """The key as hashed: ``"i:3"`` or ``"s:fc1_weight"`` (so 3 and "3" differ)."""
    return f"i:{key}" if isinstance(key, int) else f"s:{key}"


class HashRing:
    """A consistent-hash ring over servers ``0..num_servers-1``."""

    def __init__(self, num_servers: int, virtual_nodes: int = VIRTUAL_NODES):
        if isinstance(num_servers, bool) or not isinstance(num_servers, int) or num_servers < 1:
            raise KVStoreError(f"a distributed KVStore needs num_servers >= 1, got {num_servers!r}")
        points = sorted((_point(f"server-{server}#{replica}"), server)
                        for server in range(num_servers) for replica in range(virtual_nodes))
        self._hashes = [h for h, _ in points]
        self._servers = [s for _, s in points]
        self.num_servers = num_servers

    def owner(self, key: Any) -> int:
        """The server that holds ``key``: the first server point clockwise of the key's hash."""
        position = bisect.bisect(self._hashes, _point(key_token(key))) % len(self._hashes)
        return self._servers[position]

    def successor(self, server: int) -> int:
        """The server after ``server`` (the backup of its keys in chain replication)."""
        return (server + 1) % self.num_servers


class ShardPlan:
    """The parts of every key, for ``num_servers`` servers and a big-array bound.

    Parameters
    ----------
    num_servers : int
    bigarray_bound : int
        Arrays with at least this many elements are split across all servers.
    """

    def __init__(self, num_servers: int, bigarray_bound: int):
        if isinstance(bigarray_bound, bool) or not isinstance(bigarray_bound, int) or bigarray_bound < 1:
            raise KVStoreError(f"kvstore_bigarray_bound must be an int >= 1, got {bigarray_bound!r}")
        self.ring = HashRing(num_servers)
        self.num_servers = num_servers
        self.bigarray_bound = bigarray_bound

    def parts(self, key: Any, size: int) -> list[Part]:
        """The parts of ``key`` whose value has ``size`` elements, in order of position."""
        if size >= self.bigarray_bound and self.num_servers > 1 and size >= self.num_servers:
            # equal contiguous parts, the first size % num_servers one element longer
            base, extra = divmod(size, self.num_servers)
            parts, start = [], 0
            for server in range(self.num_servers):
                stop = start + base + (1 if server < extra else 0)
                parts.append(Part(server, server, start, stop, False))
                start = stop
            return parts
        return [Part(self.ring.owner(key), 0, 0, size, True)]

    def backup(self, server: int) -> int:
        """The server that keeps a replica of ``server``'s parts."""
        return self.ring.successor(server)


__all__ = ["HashRing", "Part", "ShardPlan", "VIRTUAL_NODES", "key_token"]
