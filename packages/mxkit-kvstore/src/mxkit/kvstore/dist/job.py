"""A job: the coordinator and server actors of one distributed training run.

:func:`start_job` runs where the cluster is reachable (``mxkit launch``, or a test) after
:func:`mxkit.kvstore.dist.runtime.init_ray`; workers find the actors by name in the
job's namespace (``MXKIT_JOB_NAMESPACE``, see :meth:`Job.env`).
"""

from __future__ import annotations

import uuid
from typing import Any

from mxkit.core.errors import KVStoreError

COORDINATOR_NAME = "mxkit-coordinator"
#: threads per server: a pull blocked on a round holds one, pushes must still get in
SERVER_THREADS = 64
COORDINATOR_THREADS = 64
#: how often Ray restarts a server actor that died (its parts come back from its backup)
SERVER_MAX_RESTARTS = 4
#: seconds to wait for a new job's actors to answer
START_TIMEOUT = 120.0


def server_name(index: int) -> str:
    """The actor name of server ``index``."""
    return f"mxkit-server-{index}"


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KVStoreError(f"start_job needs {name} >= 1 (an int), got {value!r}")
    return value


class Job:
    """The actors of one job (see :func:`start_job`)."""

    def __init__(self, namespace: str, num_workers: int, num_servers: int, coordinator: Any, servers: list[Any]):
        self.namespace = namespace
        self.num_workers = num_workers
        self.num_servers = num_servers
        self.coordinator = coordinator
        self.servers = servers
        self._stopped = False

    def env(self) -> dict[str, str]:
        """The environment of a worker process of this job (without ``MXKIT_RANK``, which
        differs per worker, and without the cluster's, see ``runtime.worker_environment``)."""
        return {"MXKIT_JOB_NAMESPACE": self.namespace, "MXKIT_NUM_WORKERS": str(self.num_workers),
                "MXKIT_NUM_SERVERS": str(self.num_servers)}

    def stop(self) -> None:
        """Kill every actor of the job (idempotent; no restarts)."""
        if self._stopped:
            return
        self._stopped = True
        import ray

        if not ray.is_initialized():
            # the cluster was shut down and its actors with it; a ray call here would start a
            # new local cluster only to find nothing to kill
            return
        for actor in [self.coordinator, *self.servers]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor already gone is what stop() wants
                pass

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<Job {self.namespace} workers={self.num_workers} servers={self.num_servers}>"


def start_job(num_workers: int, num_servers: int, *, namespace: str | None = None, **options: Any) -> Job:
    """Start the coordinator and ``num_servers`` servers of a job on the connected cluster.

    Parameters
    ----------
    num_workers : int
        Workers that will join (ranks ``0..num_workers-1``).
    num_servers : int
        Server actors; a small key lives on one, a big array is split across all.
    namespace : str, optional
        The Ray namespace of the job's actors (default: a fresh ``mxkit-<id>``).
    **options
        ``bigarray_bound=`` (default config ``kvstore_bigarray_bound``),
        ``max_restarts=`` of the servers (default 4), ``replicate=True`` to keep every
        server's shards on the next server too (chain replication: a killed server is
        restarted by Ray and recovers from its backup; needs 2 servers or more),
        ``allow_remote_code=True`` to let workers install a function on the servers with
        ``kv.set_updater`` (default False: the servers refuse it before deserialising it).

    Returns
    -------
    Job

    Raises
    ------
    KVStoreError
        If the sizes are not positive ints, an option is unknown, Ray is not connected
        (call ``runtime.init_ray`` first), or the actors do not start.
    """
    from mxkit.core import config
    from mxkit.kvstore.dist.runtime import _import_ray

    ray = _import_ray()
    num_workers = _positive_int("num_workers", num_workers)
    num_servers = _positive_int("num_servers", num_servers)
    unknown = sorted(set(options) - {"bigarray_bound", "max_restarts", "replicate", "allow_remote_code"})
    if unknown:
        raise KVStoreError(f"start_job got unknown options {unknown}; it takes bigarray_bound=, max_restarts=, "
                           f"replicate=, allow_remote_code=")
    allow_remote_code = bool(options.get("allow_remote_code", False))
    replicate = bool(options.get("replicate", False))
    bound, _ = config.resolve("kvstore_bigarray_bound", options.get("bigarray_bound"))
    max_restarts = options.get("max_restarts", SERVER_MAX_RESTARTS)
    if not ray.is_initialized():
        raise KVStoreError("start_job needs a Ray cluster: call mxkit.kvstore.dist.runtime.init_ray() first")
    namespace = namespace or f"mxkit-{uuid.uuid4().hex[:12]}"
    from mxkit.kvstore.dist.auth import new_secret

    secret = new_secret()  # the data channel's (see mxkit.kvstore.dist.auth); travels only through Ray
    from mxkit.kvstore.dist.coordinator import Coordinator
    from mxkit.kvstore.dist.server import ParameterServer

    names = [server_name(index) for index in range(num_servers)]
    # num_cpus=0: the actors wait on the network, they must not take the cores the workers train on
    server_class = ray.remote(num_cpus=0, max_concurrency=SERVER_THREADS, max_restarts=max_restarts,
                              max_task_retries=0)(ParameterServer)
    coordinator_class = ray.remote(num_cpus=0, max_concurrency=COORDINATOR_THREADS)(Coordinator)
    try:
        coordinator = coordinator_class.options(name=COORDINATOR_NAME, namespace=namespace).remote(
            num_workers, num_servers, names, int(bound), replicate, secret)
        servers = [server_class.options(name=name, namespace=namespace, scheduling_strategy="SPREAD").remote(
            index, num_workers, num_servers, replicate, namespace, secret, allow_remote_code, inline_updates=True)
            for index, name in enumerate(names)]
    except ValueError as exc:  # a name already taken in the namespace
        raise KVStoreError(f"cannot start a job in namespace {namespace!r}: {exc}; choose another namespace "
                           f"or stop the job that runs there") from None
    job = Job(namespace, num_workers, num_servers, coordinator, servers)
    try:
        ray.get([coordinator.ping.remote(), *[server.ping.remote() for server in servers]], timeout=START_TIMEOUT)
    except Exception as exc:
        job.stop()
        raise KVStoreError(f"the job's actors did not start within {START_TIMEOUT} s: {exc}") from None
    return job


__all__ = ["COORDINATOR_NAME", "Job", "server_name", "start_job"]
