"""Connecting to Ray: a running cluster, or a local one bound to loopback only.

Ray 2.60 needs a few settings to stay on 127.0.0.1 and out of the user's files:

- ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: without it Ray swaps a loopback node address
  for the machine's network address;
- ``RAY_USAGE_STATS_ENABLED=0``: no usage report;
- a short ``RAY_TMPDIR`` (Unix socket paths are limited to about 100 bytes);
- a temporary ``HOME``: Ray writes its cluster's authentication token to
  ``$HOME/.ray/auth_token``, and processes that join the cluster read it from there (with
  ``RAY_AUTH_MODE=token``);
- no dashboard process: ``include_dashboard=False`` still starts Ray's dashboard head (its
  job and state APIs, a metrics exporter, an HTTP server when ``ray[default]`` is installed)
  and makes ``ray.init`` wait for it; a KVStore job uses none of it, so a local cluster is
  started without that process (see :func:`_no_dashboard_process`).

:func:`init_ray` applies them, starts or connects, and remembers what it started so that
:func:`shutdown_ray` stops exactly that (never ``ray stop``, which kills by process name).
:func:`worker_environment` is what a subprocess needs to join the same cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from mxkit.core.errors import KVStoreError

#: the environment variable naming the GCS address workers connect to
ADDRESS_ENV = "MXKIT_RAY_ADDRESS"
LOOPBACK = "127.0.0.1"
#: object store of a local cluster started without an explicit size
DEFAULT_OBJECT_STORE_BYTES = 256 * 2**20
_FIXED_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
              # under `uv run` Ray would otherwise ship the working directory to its workers
              "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}

_lock = threading.Lock()
_state: dict[str, Any] = {"address": None, "started": False, "connected": False, "dirs": [], "saved_env": {}}


def _import_ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        from mxkit.core.errors import MissingComponentError

        raise MissingComponentError("the distributed KVStore needs Ray; install it with "
                                    "pip install 'mxkit-kvstore[dist]'") from None
    return ray


def _set_env(name: str, value: str) -> None:
    saved = _state["saved_env"]
    if name not in saved:
        saved[name] = os.environ.get(name)
    os.environ[name] = value


def _check_address(address: str) -> str:
    if not isinstance(address, str) or not address.strip():
        raise KVStoreError(f"a Ray address is 'HOST:PORT' or 'auto', got {address!r}")
    address = address.strip()
    if address != "auto" and not address.startswith("ray://"):
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise KVStoreError(f"a Ray address is 'HOST:PORT' (the head's GCS address, e.g. 127.0.0.1:6379) "
                               f"or 'auto', got {address!r}")
    return address


def _apply_import_time_settings() -> None:
    # Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER and RAY_ENABLE_UV_RUN_RUNTIME_ENV once,
    # when it is imported: if ray was imported before they were set, this process would
    # still pick the network address, and (under `uv run`) ship the working directory to
    # every worker as a runtime environment. The processes Ray spawns read the environment.
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False


def _current_address(ray: Any) -> str:
    return str(ray.get_runtime_context().gcs_address)


def wait_reachable(address: str, timeout: float) -> None:
    """Wait until something accepts TCP connections at ``address`` (``HOST:PORT``).

    Ray's own connect retries an unreachable head forever, deaf to Ctrl-C and SIGTERM
    while it waits in C++; this check runs first, in Python, and gives up in time.

    Raises
    ------
    KVStoreError
        If nothing answers within ``timeout`` seconds.
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            socket.create_connection((host, int(port)), timeout=max(0.1, min(2.0, remaining))).close()
            return
        except OSError as exc:
            if time.monotonic() + 0.5 >= deadline:
                raise KVStoreError(f"no Ray cluster answers at {address!r} ({exc}); gave up after {timeout:g} s "
                                   f"(config kvstore_timeout). Check the address (the head's GCS address, "
                                   f"which 'ray start --head' prints) and that the head is running") from None
            time.sleep(0.5)


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             object_store_memory: int | None = None, namespace: str | None = None,
             timeout: float | None = None) -> str:
    """Connect to a Ray cluster, or start a local one on 127.0.0.1; return its GCS address.

    Parameters
    ----------
    address : str, optional
        ``"HOST:PORT"`` of a running cluster's head, or ``"auto"`` (the cluster this
        machine belongs to). ``None`` starts a local cluster bound to loopback only.
    num_cpus : int, optional
        CPUs of a local cluster (default: Ray's, the machine's cores).
    object_store_memory : int, optional
        Bytes of a local cluster's object store (default 256 MiB).
    namespace : str, optional
        The Ray namespace of this process (named actors are looked up in it).
    timeout : float, optional
        Seconds to wait for the cluster at ``address`` to answer (default config
        ``kvstore_timeout``).

    Returns
    -------
    str
        ``"127.0.0.1:PORT"``: the address other processes pass to ``ray.init(address=...)``.

    Raises
    ------
    KVStoreError
        If ``address`` is not ``HOST:PORT`` or ``"auto"``, or the cluster cannot be reached
        within ``timeout``.
    """
    ray = _import_ray()
    if address is not None:
        address = _check_address(address)
    with _lock:
        if address not in (None, "auto") and not address.startswith("ray://") and not ray.is_initialized():
            from mxkit.core import config

            wait_reachable(address, float(config.get("kvstore_timeout", timeout)))
        if ray.is_initialized():
            # already connected (by us or by the user): reuse that cluster
            _state["address"] = _state["address"] or _current_address(ray)
            return str(_state["address"])
        for name, value in _FIXED_ENV.items():
            _set_env(name, value)
        _apply_import_time_settings()
        options: dict[str, Any] = {"log_to_driver": False}
        if namespace is not None:
            options["namespace"] = namespace
        if address is None:
            _start_local(ray, num_cpus, object_store_memory, options)
        else:
            try:
                ray.init(address=address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise KVStoreError(f"could not connect to the Ray cluster at {address!r}: {exc}; check that the "
                                   f"address is the head's GCS address (ray start --head prints it)") from None
            _state["connected"] = True
        _state["address"] = _current_address(ray)
        return str(_state["address"])


@contextlib.contextmanager
def _no_dashboard_process() -> Iterator[None]:
    """While a local cluster starts here, Ray's head starts no dashboard process.

    Ray 2.60 starts it even with ``include_dashboard=False`` (with the dashboard's modules
    left out), through ``ray._private.services.start_api_server``; answering that call
    as Ray itself does for a minimal installation with the dashboard off (no URL) and no
    process leaves nothing of it running, and nothing listening. (Called under ``_lock``.)
    """
    from ray._private import services

    original = getattr(services, "start_api_server", None)
    if original is None:  # another Ray release: its own behaviour, dashboard or not
        yield
        return

    def no_api_server(*args: Any, **kwargs: Any) -> tuple[str, None]:
        return "", None

    services.start_api_server = no_api_server
    try:
        yield
    finally:
        services.start_api_server = original


#: attempts at starting a local cluster: Ray gives its raylet a fixed 30 s to register (and
#: waits a fixed time for the GCS to write its port file), which a busy machine can miss once
LOCAL_START_ATTEMPTS = 2


def _start_local(ray: Any, num_cpus: int | None, object_store_memory: int | None, options: dict[str, Any]) -> None:
    """Start a loopback-only cluster in a private temporary directory and HOME."""
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        # a short private directory for sockets and logs, and a private HOME for the token.
        # Every Ray process that starts makes its temporary directory world-writable (0777,
        # no sticky bit), so that directory is a child of a 0700 one nobody else can enter
        private = tempfile.mkdtemp(prefix="mxray", dir="/tmp" if os.path.isdir("/tmp") else None)
        temp_dir = os.path.join(private, "r")
        os.mkdir(temp_dir, 0o700)
        home = tempfile.mkdtemp(prefix="mxhome", dir=os.path.dirname(private))
        _state["dirs"].extend([private, home])
        _set_env("RAY_TMPDIR", temp_dir)
        _set_env("HOME", home)  # (the caller's HOME is saved by the first attempt, restored at shutdown)
        try:
            with _no_dashboard_process():
                ray.init(num_cpus=num_cpus, include_dashboard=False,
                         object_store_memory=object_store_memory or DEFAULT_OBJECT_STORE_BYTES,
                         _node_ip_address=LOOPBACK, _temp_dir=temp_dir, **options)
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception when its raylet is slow
            ray.shutdown()  # the processes this attempt started
            slow = "timed out during startup" in str(exc) or "Timed out waiting for file" in str(exc)
            if attempt == LOCAL_START_ATTEMPTS or not slow:
                raise KVStoreError(f"could not start a local Ray cluster: {exc}; if the machine is busy, "
                                   f"try again, or start one with 'ray start --head' and pass its address")\
                    from None
            continue
        _state["started"] = True
        return


def connect(address: str | None, namespace: str | None) -> None:
    """Make sure this process is connected to Ray (a worker joining its job's cluster).

    Connects to ``address`` (or ``$MXKIT_RAY_ADDRESS``) unless Ray is already initialised here.

    Raises
    ------
    KVStoreError
        If Ray is not initialised and no address is given.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return
    address = address or os.environ.get(ADDRESS_ENV)
    if not address:
        raise KVStoreError(f"a distributed KVStore needs a Ray cluster: run the script under 'mxkit launch', "
                           f"set {ADDRESS_ENV}=HOST:PORT, or pass address='HOST:PORT' to mx.kv.create")
    init_ray(address, namespace=namespace)


def worker_environment() -> dict[str, str]:
    """The environment variables a subprocess needs to join the cluster of :func:`init_ray`.

    Raises
    ------
    KVStoreError
        If :func:`init_ray` has not connected this process yet.
    """
    if _state["address"] is None:
        raise KVStoreError("worker_environment() needs a cluster: call init_ray() first")
    env = dict(_FIXED_ENV)
    env[ADDRESS_ENV] = str(_state["address"])
    for name in ("RAY_TMPDIR", "HOME"):
        if name in _state["saved_env"] and os.environ.get(name):
            env[name] = os.environ[name]
    if _state["started"] or os.environ.get("RAY_AUTH_MODE"):
        # Ray 2.60 enables token authentication on clusters it starts; joiners must send the token
        env["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE", "token")
    return env


def shutdown_ray() -> None:
    """Stop what :func:`init_ray` started (or disconnect what it connected), nothing else.

    Restores the environment variables it set and removes its temporary directories.
    A cluster this module neither started nor connected to is left alone.
    """
    ray = _import_ray()
    with _lock:
        if (_state["started"] or _state["connected"]) and ray.is_initialized():
            ray.shutdown()
        for name, value in _state["saved_env"].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for directory in _state["dirs"]:
            shutil.rmtree(directory, ignore_errors=True)
        _state.update(address=None, started=False, connected=False, dirs=[], saved_env={})


def is_started_here() -> bool:
    """Whether :func:`init_ray` started a local cluster in this process."""
    return bool(_state["started"])


__all__ = ["ADDRESS_ENV", "connect", "init_ray", "shutdown_ray", "wait_reachable", "worker_environment"]
