"""MNIST for tests and examples, from local idx files only (mxkit never downloads).

MNIST ships as four files in LeCun's idx format, optionally gzipped::

    train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte

An idx file is a big-endian header, ``0x00 0x00 <type code> <ndim>``, then ``ndim`` u32
dimensions, then the values in C order. :func:`get_mnist` returns what MXNet's returns:
images as float32 ``(N, 1, rows, cols)`` scaled to ``[0, 1]`` and labels as int8.
"""

from __future__ import annotations

import gzip
import os
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError, MXKitError

#: idx type code -> big-endian numpy dtype
IDX_DTYPES: dict[int, np.dtype[Any]] = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}

MNIST_FILES = {
    "train_data": "train-images-idx3-ubyte",
    "train_label": "train-labels-idx1-ubyte",
    "test_data": "t10k-images-idx3-ubyte",
    "test_label": "t10k-labels-idx1-ubyte",
}


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """The array stored in idx file ``path`` (gzipped if its name ends in ``.gz``).

    Raises
    ------
    FormatError
        For a bad magic, an unknown type code, or a size that disagrees with the header.
    """
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise FormatError(f"{path} is not an idx file: it starts with {data[:4].hex() or 'nothing'}, expected "
                          f"00 00 <type> <ndim>")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise FormatError(f"{path}: unknown idx type code 0x{code:02X}; expected one of {known}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise FormatError(f"{path}: the header announces {ndim} dimensions but the file has {len(data)} bytes")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise FormatError(f"{path}: shape {shape} of {dtype.name} needs {expected} bytes after the header, the file "
                          f"has {len(data) - header}")
    values: np.ndarray = np.frombuffer(data, dtype=dtype, offset=header).astype(dtype.newbyteorder("="))
    return values.reshape(shape)


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write ``array`` as an idx file (gzipped if ``path`` ends in ``.gz``); for tests and tools."""
    array = np.asarray(array)
    codes = {dtype.newbyteorder("="): code for code, dtype in IDX_DTYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise MXKitError(f"idx files hold uint8, int8, int16, int32, float32 or float64, not {array.dtype}")
    payload = (bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
               + array.astype(IDX_DTYPES[code]).tobytes())
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(payload)


def _find(directory: str, stem: str) -> str:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate):
            return candidate
    raise MXKitError(f"MNIST file {stem} (or {stem}.gz) is not in {directory!r}; mxkit does not download data: "
                     f"put the four MNIST idx files there")


def get_mnist_ubyte(path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The paths of the four MNIST idx files in directory ``path`` (default: ``$MXKIT_DATA_DIR/mnist``)."""
    directory = _directory(path)
    return {key: _find(directory, stem) for key, stem in MNIST_FILES.items()}


def _directory(path: str | os.PathLike[str] | None) -> str:
    if path is not None:
        return os.fspath(path)
    root = os.environ.get("MXKIT_DATA_DIR")
    if not root:
        raise MXKitError("get_mnist needs the directory of the MNIST idx files: pass path=... or set "
                         "MXKIT_DATA_DIR (the files are read from $MXKIT_DATA_DIR/mnist); mxkit does not download")
    return os.path.join(root, "mnist")


def get_mnist(path: str | os.PathLike[str] | None = None) -> dict[str, np.ndarray]:
    """MNIST as MXNet's ``get_mnist`` returns it, read from local idx files.

    Returns
    -------
    dict
        ``train_data``/``test_data``: float32 ``(N, 1, rows, cols)`` in ``[0, 1]``;
        ``train_label``/``test_label``: int8 ``(N,)`` (the type MXNet reads them as).

    Raises
    ------
    MXKitError
        When a file is missing (the message says which and where).
    FormatError
        For a corrupt file, or images and labels whose counts differ.
    """
    files = get_mnist_ubyte(path)
    result: dict[str, Any] = {}
    for split in ("train", "test"):
        images = read_idx(files[f"{split}_data"])
        labels = read_idx(files[f"{split}_label"])
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise FormatError(f"MNIST {split} files disagree: images {images.shape} (expected (N, rows, cols)), "
                              f"labels {labels.shape} (expected (N,))")
        result[f"{split}_data"] = (images.reshape(images.shape[0], 1, *images.shape[1:]) / 255.0).astype(np.float32)
        result[f"{split}_label"] = labels.astype(np.int8)
    return result


def get_mnist_iterator(batch_size: int, input_shape: tuple[int, ...], num_parts: int = 1, part_index: int = 0,
                       path: str | os.PathLike[str] | None = None) -> tuple[Any, Any]:
    """``(train_iter, val_iter)``: NDArrayIters over local MNIST, reshaped to ``input_shape`` per
    example (``(784,)`` flat or ``(1, 28, 28)``); ``num_parts``/``part_index`` shard the training set."""
    from mxkit.io import NDArrayIter

    mnist = get_mnist(path)
    if not 0 <= part_index < num_parts:
        raise MXKitError(f"part_index={part_index} must be in 0..{num_parts - 1} (num_parts={num_parts})")

    def shaped(data: np.ndarray) -> np.ndarray:
        return data.reshape((data.shape[0], *input_shape))

    train_data = shaped(mnist["train_data"])[part_index::num_parts]
    train_label = mnist["train_label"][part_index::num_parts].astype(np.float32)
    train = NDArrayIter(train_data, train_label, batch_size, shuffle=True)
    val = NDArrayIter(shaped(mnist["test_data"]), mnist["test_label"].astype(np.float32), batch_size)
    return train, val


__all__ = ["MNIST_FILES", "get_mnist", "get_mnist_iterator", "get_mnist_ubyte", "read_idx", "write_idx"]
