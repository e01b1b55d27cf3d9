"""mxkit-io's plugin: the configuration keys of the data pipeline.

Registered by mxkit-core's plugin manager as a built-in; imports nothing but core.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``io_batch_type`` (mxkit.io._batch_arrays)."""
    yield OptionSpec("io_batch_type", "str", "auto",
                     "array type of data-iterator batches (auto: NDArray when mxkit-ndarray is installed)",
                     choices=("auto", "numpy", "ndarray"))
