"""The parameter servers of a Spark job: Ray beside Spark, and the KVStore's own job actors.

Why Ray and not servers of our own in a barrier stage: the servers, the coordinator, their
replication and recovery, the authenticated data channel and the consistency models are
mxkit-kvstore's, and they are Ray actors; a second way to run them would be a second
parameter server to keep correct. Spark runs only the workers (a barrier stage); the
driver owns the servers' lifetime.

Where Ray runs:

- ``ray_address="HOST:PORT"``: a Ray cluster that is already up (for instance one that
  ``ray.util.spark.setup_ray_cluster`` started on the Spark cluster earlier);
- a ``local[...]`` master with no address: a Ray node on the driver's machine bound to
  127.0.0.1 (``mxkit.kvstore.dist.runtime.init_ray``), which is where the executors are;
- any other master with no address: ``ray.util.spark.setup_ray_cluster``, Ray's own
  Ray-on-Spark, starts Ray worker nodes as a background Spark job, so the servers run on
  the executors' machines; it is shut down with the fit.

Secrets: Ray's cluster token (a cluster mxkit starts uses token authentication) is read on
the driver and handed to the tasks inside the task closure, which Spark ships over its own
channel; the data channel's per-job secret is made on the driver by ``start_job`` and
reaches each worker through Ray's authenticated control plane when it joins. Neither is
written into the DataFrame, the checkpoint or a log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mxkit.core.errors import KVStoreError

#: the environment variable through which a Ray process reads the cluster's token
RAY_TOKEN_ENV = "RAY_AUTH_TOKEN"


@dataclass
class RayCluster:
    """The Ray cluster a fit runs its servers on.

    Attributes
    ----------
    address : str
        The GCS address the workers connect to.
    task_env : dict
        Environment variables a task sets before it connects (cluster settings and token).
    started_here : bool
        Whether this fit started Ray in the driver (and stops it at the end).
    on_spark : bool
        Whether this fit started Ray on Spark (``setup_ray_cluster``; shut down at the end).
    """

    address: str
    task_env: dict[str, str] = field(default_factory=dict)
    started_here: bool = False
    on_spark: bool = False

    def stop(self) -> None:
        """Stop what this fit started (nothing else)."""
        from mxkit.kvstore.dist import runtime

        if self.started_here:
            runtime.shutdown_ray()
        if self.on_spark:
            from ray.util.spark import shutdown_ray_cluster

            shutdown_ray_cluster()


def _cluster_token(env: dict[str, str]) -> str | None:
    """The token of the connected cluster, if it uses token authentication."""
    token = os.environ.get(RAY_TOKEN_ENV)
    if token:
        return token
    home = env.get("HOME") or os.path.expanduser("~")
    path = os.path.join(home, ".ray", "auth_token")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    return None


def start_cluster(master: str, ray_address: str | None, num_servers: int) -> RayCluster:
    """Connect the driver to Ray (starting it where needed) for a fit on Spark ``master``.

    Raises
    ------
    KVStoreError
        If Ray cannot be started or reached.
    MissingComponentError
        If Ray is not installed.
    """
    from mxkit.kvstore.dist import runtime

    try:
        import ray
    except ModuleNotFoundError:
        from mxkit.core.errors import MissingComponentError

        raise MissingComponentError("mxkit-spark's servers run on Ray; install it with "
                                    "pip install 'mxkit-kvstore[dist]'") from None
    was_connected = ray.is_initialized()
    on_spark = False
    if ray_address is None and not master.startswith("local"):
        from ray.util.spark import setup_ray_cluster

        # one Ray worker node per server at least; the servers take no CPU of their own
        ray_address, _ = setup_ray_cluster(max_worker_nodes=num_servers, num_cpus_worker_node=1)
        on_spark = True
    if ray_address is None:
        address = runtime.init_ray(num_cpus=1)
    else:
        address = runtime.init_ray(ray_address)
    started_here = not was_connected
    env = runtime.worker_environment()
    token = _cluster_token(env)
    if token:
        env[RAY_TOKEN_ENV] = token
    # the HOME of a loopback cluster holds the token file: a task needs the value, not the path
    env.pop("HOME", None)
    return RayCluster(address=address, task_env=env, started_here=started_here, on_spark=on_spark)


@contextlib.contextmanager
def task_environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in this (executor) process for the duration, then restore what was there."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_server_count(num_servers: Any) -> int:
    """``num_servers`` as a positive int.

    Raises
    ------
    KVStoreError
        If it is not one.
    """
    if isinstance(num_servers, bool) or not isinstance(num_servers, int) or num_servers < 1:
        raise KVStoreError(f"num_servers must be a positive int, got {num_servers!r}")
    return num_servers


__all__ = ["RAY_TOKEN_ENV", "RayCluster", "check_server_count", "start_cluster", "task_environment"]
