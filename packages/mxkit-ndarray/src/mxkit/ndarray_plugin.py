"""mxkit-ndarray's plugin: the configuration keys the array layer reads.

Registered by mxkit-core's plugin manager as a built-in. It sits beside ``mxkit.ndarray``, not
inside it, because importing ``mxkit.ndarray`` loads numpy and its operators, and building the
plugin manager (which any configuration read does) must stay cheap: a memplan-only
program never pays for the array layer.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``seed`` (mxkit.ndarray.random), ``fused_numexpr`` (mxkit.ndarray.ops.fused_elemwise) and
    ``sparse_max_expansion`` (mxkit.ndarray.serialization)."""
    yield OptionSpec("seed", "int", -1, "global random seed at start-up (-1: from the OS)", minimum=-1)
    yield OptionSpec("fused_numexpr", "str", "auto",
                     "when fused elementwise nodes run through numexpr on CPU: auto (large arithmetic programs "
                     "without broadcasting, on 4 or more cores), always, never",
                     choices=("auto", "always", "never"))
    yield OptionSpec("sparse_max_expansion", "int", 1024,
                     "a sparse array is densified only up to this many times its stored bytes (or 64 MiB)",
                     minimum=1)
