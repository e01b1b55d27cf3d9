"""The distributed KVStore on Ray: ``dist_sync``, ``dist_async`` and ``dist_ssp``.

The roles of MXNet's parameter server (ps-lite), as Ray actors:

- **servers** (:mod:`.server`) own key shards and run the consistency model and the
  optimizer on them;
- a **coordinator** (:mod:`.coordinator`) keeps ranks and barriers;
- **workers** are the user's processes, each with a :class:`~.store.DistKVStore` that sums
  its local devices first, then sends one request per server per call (:mod:`.sharding`
  decides which server holds what).

:mod:`.runtime` connects to Ray (or starts a loopback cluster); :mod:`.job` starts the
actors of one training job. Ray is imported only inside this package.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import KVStoreError

#: MXNet's distributed store names and the consistency model each one runs
DIST_TYPES = {
    "dist_sync": "sequential",
    "dist_sync_device": "sequential",
    "dist_device_sync": "sequential",
    "dist": "sequential",
    "dist_async": "eventual",
    "dist_async_device": "eventual",
    "dist_device_async": "eventual",
    "dist_ssp": "bounded_delay",
    "dist_ssp_device": "bounded_delay",
    "dist_device_ssp": "bounded_delay",
}
#: the canonical type each name reports as ``kv.type``
CANONICAL = {name: "dist_" + {"sequential": "sync", "eventual": "async", "bounded_delay": "ssp"}[model]
             for name, model in DIST_TYPES.items()}


def create(kind: str, **options: Any) -> Any:
    """Make a worker's distributed store (called by ``mx.kv.create("dist_sync")``).

    Parameters
    ----------
    kind : str
        ``dist_sync`` (sequential consistency), ``dist_async`` (eventual), ``dist_ssp``
        (bounded delay, ``tau=`` default config ``staleness``), or MXNet's ``*_device``
        aliases of them (this worker's devices are summed where they are in either case).
    **options
        ``rank=``, ``num_workers=``, ``namespace=``, ``address=`` (default: the
        environment variables ``MXKIT_RANK``, ``MXKIT_NUM_WORKERS``,
        ``MXKIT_JOB_NAMESPACE``, ``MXKIT_RAY_ADDRESS`` set by ``mxkit launch``),
        ``tau=`` for ``dist_ssp``, ``timeout=`` (seconds, default config
        ``kvstore_timeout``), ``allow_remote_code=`` (let :meth:`set_updater` ship a
        function to the servers).

    Raises
    ------
    KVStoreError
        If ``kind`` is not a distributed type, an option is unknown or invalid, or no job
        runs in the namespace.
    MissingComponentError
        If Ray is not installed (``pip install 'mxkit-kvstore[dist]'``).
    """
    name = kind.strip().lower() if isinstance(kind, str) else kind
    if name not in DIST_TYPES:
        raise KVStoreError(f"unknown distributed KVStore type {kind!r}; choose one of {', '.join(DIST_TYPES)}")
    from mxkit.kvstore.dist.runtime import _import_ray
    from mxkit.kvstore.dist.store import DistKVStore

    _import_ray()  # without the dist extra: MissingComponentError saying how to install it

    return DistKVStore(CANONICAL[name], DIST_TYPES[name], **options)


__all__ = ["CANONICAL", "DIST_TYPES", "create"]
