"""mxkit-train's plugin: the configuration keys of the training loop.

Registered by mxkit-core's plugin manager as a built-in; imports nothing but core.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``update_on_kvstore`` (mxkit.train.model.kvstore_sync)."""
    yield OptionSpec("update_on_kvstore", "bool", True,
                     "whether the KVStore runs the optimizer (True) or only sums gradients for the devices' "
                     "updaters (False); MXNet's MXNET_UPDATE_ON_KVSTORE is read when this key is not set")
