"""mxkit-io's plugin: the configuration keys of the data pipeline.

Registered by mxkit-core's plugin manager as a built-in. It sits beside ``mxkit.io``, not
inside it, because importing ``mxkit.io`` loads numpy and the iterators, and building the
plugin manager (which any configuration read does) must stay cheap: a memplan-only
program never pays for the array layer.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``io_batch_type`` (mxkit.io._batch_arrays) and ``image_max_pixels`` (mxkit.io.image_header)."""
    yield OptionSpec("io_batch_type", "str", "auto",
                     "array type of data-iterator batches (auto: NDArray when mxkit-ndarray is installed)",
                     choices=("auto", "numpy", "ndarray"))
    yield OptionSpec("image_max_pixels", "int", 1 << 26,
                     "largest width x height an image decode accepts (read from the header before decoding)",
                     minimum=1)
