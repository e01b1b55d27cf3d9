"""``mx.autograd``: mxkit-ndarray's autograd (:mod:`mxkit.ndarray.autograd`) with
``get_symbol``, which exports the recorded graph as a Symbol and so needs mxkit-symbol,
a layer above NDArray."""

from __future__ import annotations

from mxkit.ndarray.autograd import *  # noqa: F403  (the facade re-exports autograd's names)
from mxkit.ndarray.autograd import __all__ as _autograd_names
from mxkit.symbol.recorded import get_symbol  # noqa: F401  (replaces ndarray's, which needs mxkit-symbol)

__all__ = sorted(set(_autograd_names) | {"get_symbol"})
