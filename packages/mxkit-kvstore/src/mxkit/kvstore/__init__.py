"""mxkit-kvstore: the parameter-server KVStore (MXNet 1.x's ``mx.kv``).

::

    from mxkit import mx

    kv = mx.kv.create("device")
    kv.init(3, mx.nd.zeros((2, 3)))
    kv.push(3, [mx.nd.ones((2, 3), ctx=mx.cpu(i)) for i in range(4)])   # summed: 4
    out = [mx.nd.zeros((2, 3), ctx=mx.cpu(i)) for i in range(4)]
    kv.pull(3, out=out)

``local`` and ``device`` run on one machine; the ``dist_*`` stores come with the ``dist``
extra. Consistency models and gradient compressors are plugins
(:mod:`mxkit.kvstore.consistency`, :mod:`mxkit.kvstore.compression`).
"""

from __future__ import annotations

import importlib
from typing import Any

from mxkit.core.errors import KVStoreError, MissingComponentError

#: MXNet's names of the single-machine stores and the kind each one is
LOCAL_TYPES = {
    "local": "local",
    "local_update_cpu": "local",
    "local_allreduce_cpu": "local",
    "device": "device",
    "local_allreduce_device": "device",
}
DIST_MODULE = "mxkit.kvstore.dist"


def create(name: str = "local", **options: Any) -> Any:
    """Make a KVStore (MXNet's ``mx.kv.create``).

    Parameters
    ----------
    name : str
        ``"local"`` (sums on the CPU) or ``"device"`` (sums on the values' devices), or
        MXNet's aliases of them; ``"dist_sync"``, ``"dist_async"``... need the distributed
        store (``pip install 'mxkit-kvstore[dist]'``).
    **options
        ``consistency=`` (a consistency model name; default config ``consistency``) and
        the model's options (``tau=`` for ``bounded_delay``).

    Raises
    ------
    KVStoreError
        If ``name`` is not a KVStore type.
    MissingComponentError
        If a distributed type is asked for without the distributed store installed.
    UnknownPluginError
        If the consistency model is unknown; the message lists the available ones.
    """
    if not isinstance(name, str):
        raise KVStoreError(f"a KVStore type is a string like 'local' or 'device', got {name!r}")
    kind = name.strip().lower()
    if kind in LOCAL_TYPES:
        from mxkit.kvstore.store import KVStore

        return KVStore(LOCAL_TYPES[kind], **options)
    if kind.startswith("dist"):
        try:
            dist = importlib.import_module(DIST_MODULE)
        except ModuleNotFoundError as exc:
            raise MissingComponentError(
                f"KVStore type {name!r} needs the distributed store, which is not installed ({exc.name} is "
                f"missing); install it with pip install 'mxkit-kvstore[dist]'"
            ) from None
        return dist.create(kind, **options)
    raise KVStoreError(f"unknown KVStore type {name!r}; choose one of {', '.join(LOCAL_TYPES)} or a dist_* "
                       f"type (dist_sync, dist_async, dist_ssp)")


def __getattr__(name: str) -> Any:
    # the store pulls in numpy and mxkit-ndarray: loaded on first use, so that building the
    # plugin registry (which imports mxkit.kvstore.plugin, hence this package) stays light
    if name == "KVStore":
        from mxkit.kvstore.store import KVStore

        return KVStore
    raise AttributeError(f"module 'mxkit.kvstore' has no attribute {name!r}")


__all__ = ["KVStore", "create"]
