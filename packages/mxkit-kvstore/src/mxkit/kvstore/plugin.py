"""The KVStore plugin: registers the built-in KVStore types, consistency models and gradient compressors.

mxkit-core's plugin manager registers this module first (``tryfirst``); third-party
models and compressors come through entry points of group ``mxkit`` the same way.
The classes are imported when a spec is built, which is cheap: the modules hold only
Python classes (numpy is imported by mxkit-core's dependencies anyway).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import CompressorSpec, ConsistencySpec, KVStoreSpec, OptionSpec


@hookimpl(tryfirst=True)
def mxkit_consistency_models() -> Iterator[ConsistencySpec]:
    """Yield ``sequential``, ``eventual`` and ``bounded_delay``."""
    from mxkit.kvstore import consistency

    yield ConsistencySpec(name="sequential", model=consistency.SequentialConsistency,
                          description="a round is merged from every worker before the update (dist_sync)")
    yield ConsistencySpec(name="eventual", model=consistency.EventualConsistency,
                          description="every push is applied on arrival (dist_async)")
    yield ConsistencySpec(name="bounded_delay", model=consistency.BoundedDelayConsistency,
                          description="pushes apply on arrival; no pull is more than tau rounds stale")


@hookimpl(tryfirst=True)
def mxkit_gradient_compressors() -> Iterator[CompressorSpec]:
    """Yield ``none``, ``2bit``, ``fp16`` and ``topk``."""
    from mxkit.kvstore import compression

    yield CompressorSpec(name="none", factory=compression.NoCompression,
                         description="no compression")
    yield CompressorSpec(name="2bit", factory=compression.TwoBitCompression,
                         description="MXNet's 2-bit quantisation with residuals (threshold)")
    yield CompressorSpec(name="fp16", factory=compression.FP16Compression,
                         description="float16 with error feedback")
    yield CompressorSpec(name="topk", factory=compression.TopKCompression,
                         description="largest-magnitude fraction (ratio) with error feedback")


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """The distributed store's configuration keys."""
    yield OptionSpec("kvstore_bigarray_bound", "int", 1_000_000,
                     "arrays with at least this many elements are split across servers", minimum=1)
    yield OptionSpec("staleness", "int", 1,
                     "dist_ssp's bound: no pull reads a value more than this many rounds stale", minimum=0)
    yield OptionSpec("kvstore_async_states", "str", "per_worker",
                     "dist_async/dist_ssp servers keep the optimizer state per worker (per_worker: dist_sync's "
                     "momentum dynamics) or one per key (shared: MXNet 1.x's)", choices=("per_worker", "shared"))
    yield OptionSpec("kvstore_overlap", "bool", True,
                     "a dist store's pushpull and pull of one CPU array per key run as engine operations: they "
                     "return at once and the next reader of the pulled arrays waits (MXNet's overlap of "
                     "communication with compute); off: they return once the arrays are pulled")
    yield OptionSpec("kvstore_batch", "bool", True,
                     "a dist store sends a call of many keys of one dtype as one batched frame per server (the "
                     "key list described once per connection, the values as one flat array); off: every key "
                     "part is listed and checked in each request")
    yield OptionSpec("kvstore_timeout", "float", 300.0,
                     "seconds a dist_* round, pull or barrier waits for missing workers before failing",
                     minimum=0.001)


def _local_store(name: str, **options: Any) -> Any:
    from mxkit.kvstore import LOCAL_TYPES
    from mxkit.kvstore.store import KVStore

    return KVStore(LOCAL_TYPES[name], type_name=name, **options)


def _dist_store(name: str, **options: Any) -> Any:
    import importlib

    try:
        dist = importlib.import_module("mxkit.kvstore.dist")  # (without Ray, its create() says how to install it)
    except ModuleNotFoundError as exc:
        from mxkit.core.errors import MissingComponentError

        raise MissingComponentError(
            f"KVStore type {name!r} needs the distributed store, which is not installed ({exc.name} is "
            f"missing); install it with pip install 'mxkit-kvstore[dist]'"
        ) from None
    return dist.create(name, **options)


@hookimpl(tryfirst=True)
def mxkit_kvstores() -> Iterator[KVStoreSpec]:
    """Yield ``local``, ``device``, ``dist_sync``, ``dist_async`` and ``dist_ssp`` (and MXNet's aliases)."""
    yield KVStoreSpec(name="local", factory=_local_store, aliases=("local_update_cpu", "local_allreduce_cpu"),
                      description="one machine; sums on the CPU")
    yield KVStoreSpec(name="device", factory=_local_store, aliases=("local_allreduce_device",),
                      description="one machine; sums on the devices of the pushed values")
    yield KVStoreSpec(name="dist_sync", factory=_dist_store, aliases=("dist_sync_device", "dist_device_sync", "dist"),
                      description="parameter servers on Ray; every worker's push of a round merged (sequential)")
    yield KVStoreSpec(name="dist_async", factory=_dist_store, aliases=("dist_async_device", "dist_device_async"),
                      description="parameter servers on Ray; every push applied on arrival (eventual)")
    yield KVStoreSpec(name="dist_ssp", factory=_dist_store, aliases=("dist_ssp_device", "dist_device_ssp"),
                      description="parameter servers on Ray; no pull more than tau rounds stale (bounded delay)")
    from mxkit.kvstore.teststore import create_test_store

    yield KVStoreSpec(name="teststore", factory=create_test_store,
                      description="MXNet's test store: broadcast and pushpull only, no optimizer, keeps nothing")
