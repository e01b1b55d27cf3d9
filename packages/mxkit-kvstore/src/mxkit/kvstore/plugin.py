"""The KVStore plugin: registers the built-in consistency models and gradient compressors.

mxkit-core's plugin manager registers this module first (``tryfirst``); third-party
models and compressors come through entry points of group ``mxkit`` the same way.
The classes are imported when a spec is built, which is cheap: the modules hold only
Python classes (numpy is imported by mxkit-core's dependencies anyway).
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import CompressorSpec, ConsistencySpec, OptionSpec


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
    yield OptionSpec("kvstore_timeout", "float", 300.0,
                     "seconds a dist_* round, pull or barrier waits for missing workers before failing",
                     minimum=0.001)
