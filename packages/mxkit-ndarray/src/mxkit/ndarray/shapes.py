"""Shape arithmetic shared by the operators' shape inference (MXNet semantics).

Unknown dimensions are 0, as in MXNet's partial shape inference; an unknown shape
(not even its rank known) is ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mxkit.core.errors import ShapeError

Shape = tuple[int, ...]


def size_of(shape: Sequence[int]) -> int:
    """Number of elements of ``shape``."""
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def merge_dim(a: int, b: int, what: str) -> int:
    """One dimension known from two sources (0 = unknown); they must agree."""
    if a == 0:
        return b
    if b == 0 or a == b:
        return a
    raise ShapeError(f"{what}: dimension {a} does not match {b}")


def same_shape(shapes: Sequence[Shape | None], what: str) -> Shape:
    """The common shape of elementwise inputs, filling unknown (0) dims from the others."""
    known = [s for s in shapes if s is not None]
    if not known:
        raise ShapeError(f"{what}: no input shape is known")
    out = tuple(known[0])
    for shape in known[1:]:
        if len(shape) != len(out):
            raise ShapeError(f"{what}: inputs must have the same shape, got "
                             f"{', '.join(str(tuple(s)) for s in known)}")
        try:
            out = tuple(merge_dim(a, b, what) for a, b in zip(out, shape))
        except ShapeError:
            raise ShapeError(f"{what}: inputs must have the same shape, got "
                             f"{', '.join(str(tuple(s)) for s in known)}") from None
    return out


def broadcast_shape(lhs: Shape, rhs: Shape, what: str) -> Shape:
    """numpy broadcasting of two shapes, aligned at the right (MXNet's broadcast_* ops)."""
    ndim = max(len(lhs), len(rhs))
    left = (1,) * (ndim - len(lhs)) + tuple(lhs)
    right = (1,) * (ndim - len(rhs)) + tuple(rhs)
    out = []
    for a, b in zip(left, right):
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        elif a == 0 or b == 0:
            out.append(max(a, b))
        else:
            raise ShapeError(f"{what}: shapes {tuple(lhs)} and {tuple(rhs)} cannot be broadcast "
                             f"together (dimension {a} vs {b}; they must be equal or one of them 1)")
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str) -> int:
    """``axis`` in ``[0, ndim)``, accepting negative axes."""
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what}: axis {axis} is out of range for an array of {ndim} dimensions "
                         f"(valid: {-ndim} to {ndim - 1})")
    return axis % ndim


def reduce_axes(axis: Sequence[int] | None, ndim: int, exclude: bool, what: str) -> tuple[int, ...]:
    """The sorted axes a reduction removes (``None`` or ``()`` = all; ``exclude`` inverts)."""
    if axis is None or len(axis) == 0:
        axes: tuple[int, ...] = tuple(range(ndim)) if not exclude else ()
        return axes
    chosen = sorted({normalize_axis(a, ndim, what) for a in axis})
    if len(chosen) != len(axis):
        raise ShapeError(f"{what}: axis {tuple(axis)} names an axis twice")
    if exclude:
        return tuple(i for i in range(ndim) if i not in chosen)
    return tuple(chosen)


def reduced_shape(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    """The shape after reducing ``axes``."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def infer_reshape(src: Shape, target: Sequence[int], reverse: bool, what: str) -> Shape:
    """MXNet's ``Reshape`` with its special codes.

    ``0`` copies the input dimension, ``-1`` infers one dimension from the size, ``-2``
    copies all remaining input dimensions, ``-3`` merges two consecutive input dimensions,
    ``-4`` splits one input dimension into the next two values (one may be ``-1``).
    With ``reverse`` the codes are matched from the right (both lists reversed, as MXNet does).
    """
    src_dims = list(src)
    codes = list(target)
    if reverse:
        src_dims.reverse()
        codes.reverse()
    out: list[int] = []
    src_index = 0
    infer_at = -1
    i = 0
    bad = f"{what}: cannot reshape {tuple(src)} to {tuple(target)}"
    while i < len(codes):
        code = codes[i]
        if code > 0:
            out.append(code)
            src_index += 1
        elif code == 0:
            if src_index >= len(src_dims):
                raise ShapeError(f"{bad}: code 0 at position {i} has no input dimension to copy")
            out.append(src_dims[src_index])
            src_index += 1
        elif code == -1:
            if infer_at >= 0:
                raise ShapeError(f"{bad}: only one dimension may be -1")
            infer_at = len(out)
            out.append(1)
            src_index += 1
        elif code == -2:
            out.extend(src_dims[src_index:])
            src_index = len(src_dims)
        elif code == -3:
            if src_index + 1 >= len(src_dims):
                raise ShapeError(f"{bad}: code -3 needs two input dimensions to merge")
            out.append(src_dims[src_index] * src_dims[src_index + 1])
            src_index += 2
        elif code == -4:
            if i + 2 >= len(codes) or src_index >= len(src_dims):
                raise ShapeError(f"{bad}: code -4 must be followed by two values and split an input dimension")
            whole = src_dims[src_index]
            first, second = codes[i + 1], codes[i + 2]
            if first == -1 and second == -1:
                raise ShapeError(f"{bad}: code -4 may infer only one of its two values")
            if first == -1:
                first = whole // second if second else 0
            if second == -1:
                second = whole // first if first else 0
            if first * second != whole:
                raise ShapeError(f"{bad}: -4 split {first} x {second} does not equal dimension {whole}")
            out += [first, second]
            src_index += 1
            i += 2
        else:
            raise ShapeError(f"{bad}: {code} is not a dimension or a special code (0, -1, -2, -3, -4)")
        i += 1
    total = size_of(src)
    if infer_at >= 0:
        rest = size_of(out)
        if rest == 0 or total % rest:
            raise ShapeError(f"{bad}: the -1 dimension cannot be inferred ({total} elements)")
        out[infer_at] = total // rest
    if reverse:
        out.reverse()
    if size_of(out) != total:
        raise ShapeError(f"{bad}: {size_of(out)} elements instead of {total}")
    return tuple(out)


__all__ = ["broadcast_shape", "infer_reshape", "merge_dim", "normalize_axis", "reduce_axes",
           "reduced_shape", "same_shape", "size_of"]
