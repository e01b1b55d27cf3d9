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

from typing import Any

from mxkit.core.errors import KVStoreError

#: MXNet's names of the single-machine stores and the kind each one is
LOCAL_TYPES = {
    "local": "local",
    "local_update_cpu": "local",
    "local_allreduce_cpu": "local",
    "device": "device",
    "local_allreduce_device": "device",
}


def create(name: str = "local", **options: Any) -> Any:
    """Make a KVStore (MXNet's ``mx.kv.create``), of a type registered through the hook
    ``mxkit_kvstores`` (see :class:`~mxkit.kvstore.base.KVStoreBase`).

    Parameters
    ----------
    name : str
        ``"local"`` (sums on the CPU) or ``"device"`` (sums on the values' devices), or
        MXNet's aliases of them; ``"dist_sync"``, ``"dist_async"``, ``"dist_ssp"`` need the
        distributed store (``pip install 'mxkit-kvstore[dist]'``); or a type a plugin adds.
    **options
        The type's options: for ``local``/``device``, ``consistency=`` (a consistency model
        name; default config ``consistency``) and the model's options (``tau=`` for
        ``bounded_delay``); for the distributed types see :func:`mxkit.kvstore.dist.create`.

    Raises
    ------
    KVStoreError
        If ``name`` is not a registered KVStore type (the message lists them).
    MissingComponentError
        If a distributed type is asked for without the distributed store installed.
    UnknownPluginError
        If the consistency model is unknown; the message lists the available ones.
    """
    from mxkit.core.errors import UnknownPluginError
    from mxkit.core.plugins import registry

    if not isinstance(name, str):
        raise KVStoreError(f"a KVStore type is a string like 'local' or 'device', got {name!r}")
    kind = name.strip().lower()
    try:
        spec = registry("kvstore").get(kind)
    except UnknownPluginError as exc:
        if type(exc) is not UnknownPluginError:  # (e.g. a name two plugins register)
            raise
        choices = ", ".join(spec.name for spec in _specs())
        raise KVStoreError(f"unknown KVStore type {name!r}; choose one of {choices} (or MXNet's aliases of "
                           f"them)") from None
    return spec.factory(kind, **options)


def _specs() -> list[Any]:
    """The registered KVStore types (each once, whatever its aliases)."""
    from mxkit.core.plugins import registry

    seen: dict[str, Any] = {}
    for _, spec, _ in registry("kvstore").items():
        seen.setdefault(spec.name, spec)
    return [seen[name] for name in sorted(seen)]


def __getattr__(name: str) -> Any:
    # the store pulls in numpy and mxkit-ndarray: loaded on first use, so that building the
    # plugin registry (which imports mxkit.kvstore.plugin, hence this package) stays light
    if name == "KVStore":
        from mxkit.kvstore.store import KVStore

        return KVStore
    if name == "KVStoreBase":
        from mxkit.kvstore.base import KVStoreBase

        return KVStoreBase
    raise AttributeError(f"module 'mxkit.kvstore' has no attribute {name!r}")


__all__ = ["KVStore", "KVStoreBase", "create"]
