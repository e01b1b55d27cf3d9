"""The coordinator: one small actor per job for membership, barriers and round clocks.

It replaces ps-lite's scheduler. Workers join with their rank and store type (every
worker must run the same consistency model); :meth:`Coordinator.barrier` waits for every
rank and fails after a timeout naming the ranks that never came, so a dead or stuck
worker cannot hang the others; workers report their step clocks (:meth:`tick`), which
:meth:`clocks` shows (the slowest worker is the one to look at).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from mxkit.core.errors import KVStoreError


class Coordinator:
    """Membership and barriers of one job.

    Parameters
    ----------
    num_workers, num_servers : int
        The job's size.
    server_names : list of str
        The servers' actor names (in the job's namespace), by index.
    bigarray_bound : int
        Arrays at least this large are split across all servers.
    replicated : bool
        Whether the servers replicate their shards (workers then keep unconfirmed pushes).
    secret : str
        The job's data-channel secret, handed to each worker that joins (never in
        :meth:`describe`).
    """

    def __init__(self, num_workers: int, num_servers: int, server_names: list[str], bigarray_bound: int,
                 replicated: bool = False, secret: str = ""):
        self._secret = secret
        self.info = {"num_workers": num_workers, "num_servers": num_servers, "servers": list(server_names),
                     "bigarray_bound": bigarray_bound, "replicated": bool(replicated) and num_servers > 1}
        self._condition = threading.Condition()
        self._joined: dict[int, tuple[str, Any]] = {}
        self._arrived: dict[int, set[int]] = {}  # barrier generation -> ranks there
        self._released = -1  # the last barrier generation every rank passed
        self._clocks = [0] * num_workers

    def ping(self) -> bool:
        """True (a readiness check)."""
        return True

    def _check_rank(self, rank: Any) -> int:
        workers = self.info["num_workers"]
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < workers:
            raise KVStoreError(f"rank {rank!r} is out of range: this job has {workers} workers, ranks "
                               f"0..{workers - 1} (set MXKIT_RANK or pass rank= to mx.kv.create)")
        return rank

    def join(self, rank: int, kind: str, model: Any) -> dict[str, Any]:
        """Register ``rank`` running store type ``kind`` with consistency ``model``.

        Returns the job's info, the current ``epoch`` (barriers every rank passed) and the
        data channel's ``secret``.

        Raises
        ------
        KVStoreError
            If ``rank`` is out of range, or another worker runs a different type or model.
        """
        self._check_rank(rank)
        with self._condition:
            for other, (other_kind, other_model) in self._joined.items():
                if other != rank and (other_kind, other_model) != (kind, model):
                    raise KVStoreError(f"rank {rank} created a {kind!r} store with {model!r}, but rank {other} "
                                       f"uses {other_kind!r} with {other_model!r}; every worker of a job must "
                                       f"create the same store type")
            self._joined[rank] = (kind, model)
            # a store made later in a job (a restarted worker, a new store in a test) starts
            # at the epoch after the last barrier every rank passed
            return {**self.info, "epoch": self._released + 1, "secret": self._secret}

    def barrier(self, rank: int, generation: int, timeout: float) -> None:
        """Wait until every rank reached barrier ``generation``.

        Raises
        ------
        KVStoreError
            After ``timeout`` seconds, naming the ranks that did not arrive.
        """
        self._check_rank(rank)
        deadline = time.monotonic() + timeout
        with self._condition:
            arrived = self._arrived.setdefault(generation, set())
            arrived.add(rank)
            self._condition.notify_all()
            workers = self.info["num_workers"]
            while len(arrived) < workers and self._released < generation:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(workers)) - arrived)
                    raise KVStoreError(f"barrier {generation} timed out after {timeout} s on rank {rank}: rank(s) "
                                       f"{missing} did not arrive (arrived: {sorted(arrived)}); a worker died, is "
                                       f"stuck, or calls barrier() fewer times than the others; raise config "
                                       f"kvstore_timeout if it is only slow")
                self._condition.wait(remaining)
            self._released = max(self._released, generation)
            self._arrived.pop(generation - 1, None)  # every rank is past the previous one

    def tick(self, rank: int, clock: int) -> None:
        """Record that ``rank`` finished step ``clock``."""
        self._check_rank(rank)
        with self._condition:
            self._clocks[rank] = max(self._clocks[rank], clock)

    def clocks(self) -> list[int]:
        """The last step each rank reported."""
        with self._condition:
            return list(self._clocks)

    def describe(self) -> dict[str, Any]:
        """The job's size, servers and joined ranks."""
        with self._condition:
            return {**self.info, "joined": sorted(self._joined)}


__all__ = ["Coordinator"]
