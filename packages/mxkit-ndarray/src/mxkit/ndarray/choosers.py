"""MXNet 1.x's Python functions that pick an operator, or its parameters, from their
arguments: ``histogram`` (bins as a count or as an array of edges), ``split_v2``
(split points or a number of equal sections) and ``onehot_encode`` (the output gives the
depth). The Symbol versions are in
:mod:`mxkit.symbol.choosers`; both build the same registry operators."""

from __future__ import annotations

from typing import Any


def histogram_call(a: Any, bins: Any, range: Any, is_array: Any) -> tuple[tuple, dict]:
    """The inputs and parameters of ``_histogram`` for MXNet's ``histogram(a, bins, range)``."""
    from mxkit.core.errors import MXKitError

    if is_array(bins):
        return (a, bins), {}
    if isinstance(bins, int) and not isinstance(bins, bool):
        if range is None:
            raise MXKitError(f"histogram: bins={bins} (a count) needs range=(low, high)")
        return (a,), {"bin_cnt": bins, "range": tuple(range)}
    raise MXKitError(f"histogram: bins must be an int or an array of edges, got {type(bins).__name__}")


def _data_range(values: Any) -> tuple[float, float]:
    """numpy.histogram's default range: the data's extremes, widened by 0.5 each way when they are
    equal, and (0, 1) for no data."""
    if values.size == 0:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def split_v2_params(indices_or_sections: Any, axis: int, squeeze_axis: bool) -> dict:
    """The parameters of ``_split_v2`` for MXNet's ``split_v2(ary, indices_or_sections, axis, squeeze_axis)``."""
    from mxkit.core.errors import MXKitError

    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        return {"sections": indices_or_sections, "axis": axis, "squeeze_axis": squeeze_axis}
    if isinstance(indices_or_sections, (tuple, list)):
        return {"indices": (0, *indices_or_sections), "axis": axis, "squeeze_axis": squeeze_axis}
    raise MXKitError(f"split_v2: indices_or_sections must be an int or a tuple of split points, got "
                     f"{indices_or_sections!r}")


def histogram(a: Any, bins: Any = 10, range: Any = None, **kwargs: Any) -> Any:
    """Counts of ``a`` in ``bins`` equal bins over ``range``, or in the bins an array of edges
    gives; returns ``(counts, edges)`` (numpy.histogram). Without ``range``, a count of bins
    spans the data's minimum to maximum (numpy's rule) and the counts are float32, as MXNet
    1.9.1's ``nd.histogram`` gives them."""
    from mxkit.ndarray.invoke import invoke_by_name
    from mxkit.ndarray.ndarray import NDArray

    if range is None and isinstance(bins, int) and not isinstance(bins, bool) and isinstance(a, NDArray):
        # MXNet 1.9.1 takes numpy's result here and wraps it with nd.array, whose default dtype makes
        # the counts float32 (they are int64 when a range is given)
        counts, edges = invoke_by_name("_histogram", a, bin_cnt=bins, range=_data_range(a.asnumpy()), **kwargs)
        return counts.astype("float32"), edges
    inputs, params = histogram_call(a, bins, range, lambda v: isinstance(v, NDArray))
    return invoke_by_name("_histogram", *inputs, **params, **kwargs)


def split_v2(ary: Any, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False) -> Any:
    """Splits ``ary`` along ``axis`` at the given points, or into that many equal sections."""
    from mxkit.ndarray.invoke import invoke_by_name

    return invoke_by_name("_split_v2", ary, **split_v2_params(indices_or_sections, axis, squeeze_axis))


def onehot_encode(indices: Any, out: Any) -> Any:
    """Writes one-hot rows of ``indices`` into ``out`` (N, depth) and returns it (MXNet 1.x's form:
    the output array gives the depth)."""
    from mxkit.ndarray.invoke import invoke_by_name

    return invoke_by_name("_onehot_encode", indices, out, out=out)


__all__ = ["histogram", "histogram_call", "onehot_encode", "split_v2", "split_v2_params"]
