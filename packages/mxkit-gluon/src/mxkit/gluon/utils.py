"""Gluon helpers: ``split_data``, ``split_and_load``, ``clip_global_norm``, ``check_sha1`` and
``download`` (which finds a local file, never the network)."""

from __future__ import annotations

import math
from typing import Any

from mxkit.core.errors import ShapeError


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list[Any]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis``.

    With ``even_split=False`` the sizes differ by at most one, the larger parts first (as
    ``numpy.array_split`` and MXNet 1.9.1 divide them).
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ShapeError(f"data with shape {data.shape} cannot be evenly split into {num_slice} slices along axis "
                         f"{batch_axis}; use a batch size that's a multiple of {num_slice} or set even_split=False")
    if num_slice > size:
        raise ShapeError(f"too many slices ({num_slice}) for data with shape {data.shape}")
    each, extras = divmod(size, num_slice)
    bounds, start = [], 0
    for i in range(num_slice):
        end = start + each + (1 if i < extras else 0)
        bounds.append((start, end))
        start = end
    from mxkit import ndarray

    if getattr(data, "stype", "default") != "default":
        # a sparse batch (a csr matrix of features) is split by rows and keeps its storage
        if batch_axis != 0:
            raise ShapeError(f"a {data.stype} array can be split only along axis 0 (its rows), not axis "
                             f"{batch_axis}")
        return [data[b:e] for b, e in bounds]
    return [ndarray.slice_axis(data, axis=batch_axis, begin=b, end=e) for b, e in bounds]


def split_and_load(data: Any, ctx_list: list[Any], batch_axis: int = 0, even_split: bool = True) -> list[Any]:
    """Split ``data`` and load each part onto one context of ``ctx_list`` (a csr batch is split by
    rows into csr parts)."""
    from mxkit import ndarray
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    if not isinstance(data, ndarray.NDArray | BaseSparseNDArray):
        data = ndarray.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays: list[Any], max_norm: float, check_isfinite: bool = True) -> Any:
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``.

    Row-sparse arrays are scaled through their stored rows. Returns the norm before clipping:
    a float with ``check_isfinite`` (which waits for it, and warns when it is nan or inf),
    else a ``(1,)`` NDArray, so that nothing waits (MXNet's contract).
    """
    from mxkit import ndarray

    if not arrays:
        raise ShapeError("clip_global_norm needs at least one array")

    def values(array: Any) -> Any:
        return array.data if getattr(array, "stype", "default") == "row_sparse" else array

    ctx = arrays[0].context
    squares = [ndarray.sum(ndarray.square(values(a))).as_in_context(ctx) for a in arrays]
    total = ndarray.sqrt(ndarray.add_n(*squares) if len(squares) > 1 else squares[0])
    if check_isfinite and not math.isfinite(float(total.asscalar())):
        import warnings

        warnings.warn("nan or inf is detected; clipping results will be undefined", stacklevel=2)
    scale = ndarray.minimum(max_norm / (total + 1e-8), 1.0)
    for array in arrays:
        target = values(array)
        target *= scale.as_in_context(target.context)
    return float(total.asscalar()) if check_isfinite else total


def check_sha1(filename: str, sha1_hash: str) -> bool:
    """Whether the SHA-1 of file ``filename`` is ``sha1_hash`` (hex; MXNet compares the whole
    digest, or its first ``len(sha1_hash)`` characters when a shorter prefix is given)."""
    import hashlib

    digest = hashlib.sha1()
    with open(filename, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    text = digest.hexdigest()
    return text[:len(sha1_hash)] == sha1_hash.lower() if len(sha1_hash) < len(text) else text == sha1_hash.lower()


def download(url: str, path: str | None = None, overwrite: bool = False, sha1_hash: str | None = None,
             retries: int = 5, verify_ssl: bool = True) -> str:
    """MXNet's ``gluon.utils.download``: mxkit downloads nothing, so this returns the local file
    that the URL would have been saved as when it exists (and matches ``sha1_hash`` if given),
    and otherwise raises :class:`~mxkit.gluon.GluonError` naming the file to put there."""
    import os

    from mxkit.gluon.parameter import GluonError

    name = url.split("/")[-1]
    if path is None:
        target = name
    else:
        target = os.path.join(os.path.expanduser(path), name) if os.path.isdir(path) else os.path.expanduser(path)
    if os.path.isfile(target) and not overwrite and (sha1_hash is None or check_sha1(target, sha1_hash)):
        return target
    raise GluonError(f"download({url!r}): mxkit downloads nothing; fetch the file yourself and save it as "
                     f"{target!r}" + (f" (SHA-1 {sha1_hash})" if sha1_hash else "") +
                     (" (overwrite=True asks for a fresh copy, which mxkit cannot make)" if overwrite else ""))
