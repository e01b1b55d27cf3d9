"""Small pieces shared by the operator definitions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit.ndarray.shapes import same_shape


def sum_to_shape(xp: Any, array: Any, shape: Sequence[int]) -> Any:
    """Sum ``array`` over the axes that broadcasting added or stretched, giving ``shape``."""
    shape = tuple(shape)
    if array.shape == shape:
        return array
    extra = array.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, dim in enumerate(shape) if dim == 1 and array.shape[extra + i] != 1
    )
    summed = array.sum(axis=axes, keepdims=True) if axes else array
    return summed.reshape(shape)


def is_floating(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating type: numpy's (kind ``f``) or ml_dtypes' bfloat16 (kind ``V`` to numpy)."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name == "bfloat16")


def lowest(xp: Any, dtype: Any) -> Any:
    """The lowest finite value of ``dtype`` (bfloat16's from ml_dtypes, whose type numpy's finfo does not know)."""
    if dtype.kind in "iu":
        return xp.iinfo(dtype).min
    if dtype.kind == "V" and dtype.name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(dtype).min
    return xp.finfo(dtype).min


def write(xp: Any, out: Any, value: Any) -> None:
    """Store ``value`` into the preallocated output (casting to the output dtype, as MXNet does)."""
    xp.copyto(out, value, casting="unsafe")


def elementwise_shape(name: str):
    """Shape inference of an operator whose inputs and single output share one shape."""

    def infer(params: dict, in_shapes: list) -> list:
        return [same_shape(in_shapes, name)]

    return infer


def first_shape(params: dict, in_shapes: list) -> list:
    """Output shaped like the first input."""
    return [tuple(in_shapes[0])]


def no_gradient(F, params, inputs, outputs, out_grads):
    """Gradient of an operator whose output is piecewise constant in its inputs: zero."""
    return [None] * len(inputs)
