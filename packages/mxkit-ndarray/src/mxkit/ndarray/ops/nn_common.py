"""Pieces shared by the neural-network operators (``nn_*.py``).

Conventions these operators follow beyond the registry's own (see ``registry.py``):

- training mode reaches a kernel as ``params["_is_train"]`` (missing means prediction, as
  in MXNet's imperative default); BatchNorm, Dropout and LeakyReLU's ``rrelu`` read it;
- auxiliary states (``OpDef.aux_names``) reach the kernel after the regular inputs, in
  MXNet's order (BatchNorm: ``data, gamma, beta, moving_mean, moving_var``), and a kernel
  in training mode updates them in place;
- an executor marks outputs that nothing reads in ``params["_req"]`` (MXNet's OpReqType
  ``kNullOp``), so a backward kernel may skip a gradient nobody needs (:func:`wanted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit.core.errors import ShapeError

Shape = tuple[int, ...]


def public(params: dict) -> dict:
    """The parameters without the private ``_rng``/``_is_train`` entries (to pass on to ``F``)."""
    return {k: v for k, v in params.items() if not k.startswith("_")}


def as_list(value: Any) -> list:
    """``F`` returns one array for a single-output operator and a sequence otherwise."""
    # type(), not isinstance: a symbolic F returns a graph Entry, which is a NamedTuple
    return list(value) if type(value) in (list, tuple) else [value]


def wanted(params: dict, output: int) -> bool:
    """Whether output ``output`` is read by anything (False only when the executor said "null")."""
    req = params.get("_req")
    return req is None or req[output] != "null"


def is_train(params: dict) -> bool:
    """Whether the caller runs the operator in training mode."""
    return bool(params.get("_is_train", False))


def known(shape: Sequence[int] | None) -> bool:
    """Whether ``shape`` is fully known (not ``None`` and no 0 placeholder dimension)."""
    return shape is not None and all(int(d) > 0 for d in shape)


def fmt(shape: Sequence[int] | None) -> str:
    return "?" if shape is None else str(tuple(int(d) for d in shape))


def expect_shape(op: str, what: str, got: Sequence[int] | None, want: Shape, why: str) -> None:
    """Raise a :class:`ShapeError` when a known input shape ``got`` differs from ``want``."""
    if got is None:
        return
    got = tuple(int(d) for d in got)
    if len(got) != len(want) or any(g and w and g != w for g, w in zip(got, want)):
        raise ShapeError(f"{op}: {what} has shape {got}, expected {want} ({why})")


def spatial_tuple(op: str, name: str, value: Sequence[int], ndim: int, default: int) -> Shape:
    """A per-spatial-axis parameter (``stride``, ``pad``...) with MXNet's empty-means-default rule."""
    if len(value) == 0:
        return (default,) * ndim
    if len(value) != ndim:
        raise ShapeError(f"{op}: {name}={tuple(value)} has {len(value)} values but the kernel has {ndim} "
                         f"spatial dimensions; give {ndim} values")
    return tuple(int(v) for v in value)


__all__ = ["as_list", "expect_shape", "fmt", "is_train", "known", "public", "spatial_tuple"]
