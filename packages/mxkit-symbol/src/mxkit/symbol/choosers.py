"""``mx.sym.histogram`` and ``mx.sym.split_v2``: the Symbol forms of
:mod:`mxkit.ndarray.choosers` (the same operator and parameter choice)."""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.choosers import histogram_call, split_v2_params
from mxkit.symbol.op import create


def histogram(a: Any, bins: Any = 10, range: Any = None, **kwargs: Any) -> Any:
    """Counts of ``a`` in bins (a count over ``range``, or a Symbol of edges); outputs (counts, edges)."""
    from mxkit.symbol.symbol import Symbol

    inputs, params = histogram_call(a, bins, range, lambda v: isinstance(v, Symbol))
    return create("_histogram", *inputs, **params, **kwargs)


def split_v2(ary: Any, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False, **kwargs: Any) -> Any:
    """Splits ``ary`` along ``axis`` at the given points, or into that many equal sections."""
    return create("_split_v2", ary, **split_v2_params(indices_or_sections, axis, squeeze_axis), **kwargs)


__all__ = ["histogram", "split_v2"]
