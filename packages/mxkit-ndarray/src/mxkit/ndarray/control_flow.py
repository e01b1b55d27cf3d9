"""``mx.nd.contrib.foreach``: a Python loop over the first axis of NDArrays, as MXNet's.

Each step slices the data, calls ``body`` and keeps its outputs; the outputs are stacked along
a new first axis. Under ``autograd.record()`` every step is recorded like any other
imperative code, so the loop is differentiated step by step. (``mx.sym.contrib.foreach``
builds the same loop in a graph.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.errors import MXKitError

__all__ = ["ForeachError", "flatten_nested", "foreach", "regroup_nested"]


class ForeachError(MXKitError):
    """foreach was given data, states or a body result of the wrong kind."""


def flatten_nested(value: Any, what: str, kind: type, error: type[MXKitError] = ForeachError) -> tuple[list[Any], Any]:
    """The ``kind`` objects of ``value`` (one, or a nested list or tuple of them) in order, and the
    nesting format that :func:`regroup_nested` rebuilds it from (0: one object; a list: a list).

    Anything else raises ``error`` naming ``what`` (the control-flow operators of the symbol
    package share these with :func:`foreach`)."""
    if isinstance(value, kind):
        return [value], 0
    if isinstance(value, (list, tuple)):
        flat: list[Any] = []
        fmt = []
        for item in value:
            items, item_fmt = flatten_nested(item, what, kind, error)
            flat += items
            fmt.append(item_fmt)
        return flat, fmt
    one = "an NDArray" if kind.__name__ == "NDArray" else f"a {kind.__name__}"
    raise error(f"foreach: {what} must be {one} or a (nested) list of them, got "
                f"{type(value).__name__}")


def regroup_nested(flat: list[Any], fmt: Any) -> tuple[Any, list[Any]]:
    """``flat``'s leading objects nested as ``fmt`` (from :func:`flatten_nested`), and the rest."""
    if isinstance(fmt, int):
        return flat[0], flat[1:]
    out = []
    for item_fmt in fmt:
        item, flat = regroup_nested(flat, item_fmt)
        out.append(item)
    return out, flat


_flatten = flatten_nested
_regroup = regroup_nested


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any, init_states: Any) -> tuple[Any, Any]:
    """Run ``body`` over the first axis of ``data`` (MXNet's ``mx.nd.contrib.foreach``).

    Parameters
    ----------
    body : callable
        ``body(step_data, states) -> (outputs, new_states)``: ``step_data`` is ``data[i]`` (a
        list of them when ``data`` is a list), ``states`` has the structure of ``init_states``.
    data : NDArray or list of NDArray
        The sequence(s), all with the same first dimension (the number of steps).
    init_states : NDArray or (nested) list of NDArray
        The states of the first step.

    Returns
    -------
    (outputs, states)
        Each output of ``body`` stacked along a new first axis (in ``body``'s structure), and
        the last step's states.
    """
    from mxkit.ndarray import NDArray, stack

    flat_data, data_fmt = _flatten(data, "data", NDArray)
    _flatten(init_states, "init_states", NDArray)
    lengths = {int(d.shape[0]) if d.ndim else -1 for d in flat_data}
    if len(lengths) != 1 or -1 in lengths:
        raise ForeachError(f"foreach: every data array needs the same first dimension (the steps), got shapes "
                           f"{[tuple(d.shape) for d in flat_data]}")
    steps = lengths.pop()
    if steps == 0:
        raise ForeachError("foreach: the data has no steps (first dimension 0); outputs would have no shape")
    states = init_states
    per_step: list[list[Any]] = []
    out_fmt: Any = 0
    for step in range(steps):
        step_data, _ = _regroup([d[step] for d in flat_data], data_fmt)
        result = body(step_data, states)
        if not isinstance(result, (list, tuple)) or len(result) != 2:
            raise ForeachError(f"foreach: body must return (outputs, new_states), got {type(result).__name__}")
        outputs, states = result
        flat_out, out_fmt = _flatten(outputs, "the body's outputs", NDArray)
        per_step.append(flat_out)
    stacked = [stack(*outs, axis=0) for outs in zip(*per_step)]
    outputs, _ = _regroup(stacked, out_fmt)
    return outputs, states
