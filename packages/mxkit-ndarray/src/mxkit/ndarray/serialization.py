"""MXNet 1.x's NDArray binary file format (``mx.nd.save`` / ``mx.nd.load``) on numpy arrays.

This module knows nothing of NDArray: it reads and writes numpy arrays, so parameter files
can be inspected or converted with numpy alone, and the NDArray layer wraps it.

The layout, all integers little-endian (``src/ndarray/ndarray.cc`` of MXNet 1.9.1,
``NDArray::Save``/``NDArray::Load`` and the legacy loaders)::

    file    := u64 0x112 | u64 0 (reserved) | u64 n | record * n | u64 m | name * m
    name    := u64 length | length bytes of UTF-8                  (m is 0 or n)
    record  := V3 | V2 | V1 | V0
    V2, V3  := u32 magic (0xF993FAC9, 0xF993FACA) | i32 storage type
               | [storage shape, when sparse] | shape
               | i32 device type | i32 device id | i32 dtype flag
               | [(i32 aux dtype flag | aux shape) per aux array, when sparse]
               | data | [aux data per aux array]
    shape   := i32 ndim | i64 * ndim
    V1      := u32 0xF993FAC8 | shape | device | dtype flag | data     (no storage type)
    V0      := u32 ndim | u32 * ndim | device | dtype flag | data      (no magic at all)

Shape semantics differ between versions, and so does what ends a record early:

- V2 (``mx.nd.save`` outside numpy mode) uses legacy shapes: ``ndim == 0`` is a "none"
  array (``mx.nd.NDArray`` without storage) and the record stops after the shape. A 0-d
  array cannot be written. A dimension of 0 is written as is and reads back as is.
- V3 (numpy shape semantics, ``npx.set_np()``) writes 0-d arrays as ``ndim == 0`` with
  one element of data; an unknown shape (``ndim == -1`` or a dimension of -1) is a none
  array. MXNet allows only dense storage in V3.
- V1 and V0 come from MXNet before 1.0, whose writers stopped a none array's record
  after ``ndim == 0``; they are read that way here. (MXNet 1.9.1's legacy loader reads
  such a record as 0-d and then fails on the bytes that follow.)

Storage types: 0 dense, 1 row_sparse (one aux array: the row indices; the storage shape
is ``(number of stored rows, *shape[1:])``), 2 csr (two aux arrays: indptr, then column
indices; the storage shape is ``(nnz,)``). Device types: 1 cpu, 2 gpu, 3 cpu_pinned,
5 cpu_shared. Dtype flags are those of :mod:`mxkit.core.dtypes`.

Loading never trusts a size read from the file: every count is checked against the bytes
that remain before anything is allocated, and a short, corrupt or over-long file raises
:class:`~mxkit.core.errors.FormatError` naming the offset and what was expected there.
Stricter than MXNet, it also refuses bytes after the last name and repeated names (which
``mx.nd.load`` would silently collapse into one dict entry).
"""

from __future__ import annotations

import io
import os
import struct
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
from mxkit.core.config import get
from mxkit.core.dtypes import DTYPE_FLAGS, FLAG_DTYPES, dtype_flag, to_numpy
from mxkit.core.errors import ConfigError, DTypeError, FormatError, MXKitError, ShapeError

#: a sparse array may always densify to this many bytes, whatever it stores
SPARSE_DENSE_FLOOR_BYTES = 64 << 20

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

#: storage type code -> MXNet's storage type name
STORAGE_TYPES: dict[int, str] = {0: "default", 1: "row_sparse", 2: "csr"}
_AUX_COUNT = {0: 0, 1: 1, 2: 2}

#: device type code (``Context::DeviceType``) -> name
DEVICE_TYPES: dict[int, str] = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}

# numpy 1.x cannot hold more dimensions; a larger ndim in a file is corruption, not data.
_MAX_NDIM = 32
_MAX_ELEMENTS = sys.maxsize // 16  # leaves room for the widest element (8 bytes) and then some
_FLAG_CACHE: dict[np.dtype, int] = {}  # dtype -> flag, and flag -> little-endian dtype
_DTYPE_CACHE: dict[int, np.dtype] = {}
_STRUCTS: dict[str, struct.Struct] = {}  # compiled little-endian layouts, by format
_INDEX_FLAGS = {flag for name, flag in DTYPE_FLAGS.items() if name.startswith(("int", "uint"))}


@dataclass(frozen=True, eq=False)
class SparseArray:
    """A row_sparse or csr array as stored in the file, without densifying it.

    Parameters
    ----------
    stype : str
        ``"row_sparse"`` or ``"csr"``.
    shape : tuple of int
        The logical (dense) shape.
    data : numpy.ndarray
        The stored values: ``(len(indices), *shape[1:])`` for row_sparse, ``(nnz,)`` for csr.
    indices : numpy.ndarray
        row_sparse: the sorted ids of the stored rows; csr: the column id of each value.
    indptr : numpy.ndarray or None
        csr only: ``shape[0] + 1`` offsets into ``data`` per row.
    """

    stype: str
    shape: tuple[int, ...]
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        except (TypeError, ValueError):
            raise ShapeError(f"the shape of a {self.stype} array must be a tuple of ints, got {self.shape!r}") from None
        problem = _sparse_structure_problem(self)
        if problem is not None:
            raise ShapeError(f"invalid {self.stype} array of shape {self.shape}: {problem}")

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the stored values."""
        return self.data.dtype

    @property
    def stored_nbytes(self) -> int:
        """Bytes of the stored values and indices."""
        return self.data.nbytes + self.indices.nbytes + (self.indptr.nbytes if self.indptr is not None else 0)

    def check_dense_size(self) -> None:
        """Raise FormatError if the dense form is out of proportion to what is stored."""
        dense = _size(self.shape) * self.data.dtype.itemsize
        ratio = int(get("sparse_max_expansion"))
        allowed = max(SPARSE_DENSE_FLOOR_BYTES, ratio * self.stored_nbytes)
        if dense > allowed:
            raise FormatError(
                f"a {self.stype} array of logical shape {self.shape} stores {self.stored_nbytes} bytes but its dense "
                f"form needs {dense} bytes: more than config sparse_max_expansion = {ratio} times what it stores (and "
                f"more than {SPARSE_DENSE_FLOOR_BYTES} bytes). Keep it sparse (load_arrays(..., sparse='keep')) "
                f"or raise the limit (environment MXKIT_SPARSE_MAX_EXPANSION, or "
                f"mxkit.core.config.override(sparse_max_expansion=...)) if the file is trusted")

    def todense(self) -> np.ndarray:
        """The dense numpy array this sparse array stands for.

        Raises
        ------
        FormatError
            If the dense array would take more than config ``sparse_max_expansion`` times
            the bytes the sparse array stores (and more than 64 MiB): a few bytes of file
            must not claim gigabytes of memory.
        MXKitError
            If the dense array does not fit in memory (a sparse array's logical shape
            may be far larger than what it stores).
        """
        self.check_dense_size()
        try:
            dense = np.zeros(self.shape, dtype=self.data.dtype)
        except MemoryError:
            nbytes = _size(self.shape) * self.data.dtype.itemsize
            raise MXKitError(f"the dense form of this {self.stype} array of shape {self.shape} needs "
                             f"{nbytes} bytes, more than memory allows; keep it sparse "
                             "(load_arrays(..., sparse='keep'))") from None
        if self.stype == "row_sparse":
            dense[self.indices] = self.data
        else:
            assert self.indptr is not None
            rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
            dense[rows, self.indices] = self.data
        return dense


@dataclass(frozen=True)
class StoredArray:
    """One record of a file, with what the file says beyond the values.

    Attributes
    ----------
    value : numpy.ndarray, SparseArray or None
        The array; ``None`` for a "none" array (an NDArray that has no storage).
    version : int
        The record layout: 3, 2, 1 (magic-tagged) or 0 (the pre-magic layout).
    device_type : str or None
        Where it lived when saved (``"cpu"``, ``"gpu"``, ...); None for a none array.
    device_id : int or None
        The device index; None for a none array.
    """

    value: np.ndarray | SparseArray | None
    version: int
    device_type: str | None = None
    device_id: int | None = None


# --------------------------------------------------------------------------- reading


class _Reader:
    """Reads exact byte counts from a stream, knowing the offset and the bytes left."""

    def __init__(self, stream: BinaryIO, size: int, label: str) -> None:
        self.stream = stream
        self.offset = 0
        self.size = size
        self.label = label

    def fail(self, message: str, offset: int | None = None) -> FormatError:
        at = self.offset if offset is None else offset
        return FormatError(f"{self.label}: at byte offset {at}: {message}")

    def need(self, nbytes: int, what: str) -> None:
        left = self.size - self.offset
        if nbytes > left:
            raise self.fail(f"truncated or corrupt file: expected {what} ({nbytes} bytes), "
                            f"but only {left} bytes remain")

    def read(self, nbytes: int, what: str) -> bytes:
        if nbytes > self.size - self.offset:
            self.need(nbytes, what)
        chunk = self.stream.read(nbytes)
        if len(chunk) != nbytes:  # the stream shrank under us
            raise self.fail(f"expected {what} ({nbytes} bytes), but the stream ended after {len(chunk)}")
        self.offset += nbytes
        return chunk

    def values(self, fmt: str, what: str) -> tuple[Any, ...]:
        """The little-endian ``struct`` fields of ``fmt``."""
        layout = _STRUCTS.get(fmt) or _STRUCTS.setdefault(fmt, struct.Struct("<" + fmt))
        return layout.unpack(self.read(layout.size, what))

    def unpack(self, fmt: str, what: str) -> Any:
        """The one ``struct`` field of ``fmt``."""
        return self.values(fmt, what)[0]

    def array(self, count: int, dtype: np.dtype, what: str) -> np.ndarray:
        """``count`` elements of ``dtype`` into a fresh, writable, aligned array."""
        nbytes = count * dtype.itemsize
        self.need(nbytes, what)
        out = np.empty(count, dtype=dtype)
        view = out.view(np.uint8).data
        got = 0
        while got < nbytes:  # unbuffered streams may fill less than asked
            step = self.stream.readinto(view[got:])  # type: ignore[attr-defined]
            if not step:
                break
            got += step
        if got != nbytes:
            raise self.fail(f"expected {what} ({nbytes} bytes), but the stream ended after {got}")
        self.offset += nbytes
        if not out.dtype.isnative:  # a big-endian host: hand out native arrays
            out = out.astype(out.dtype.newbyteorder("="))
        return out


def _read_shape(reader: _Reader, what: str) -> tuple[int, ...] | None:
    """A shape (i32 ndim, i64 dims); None when ndim is -1 (unknown). Dimensions are unchecked."""
    start = reader.offset
    ndim = reader.unpack("i", f"the ndim of {what}")
    if ndim == -1:
        return None
    if not 0 <= ndim <= _MAX_NDIM:
        raise reader.fail(f"the ndim of {what} is {ndim}; expected 0..{_MAX_NDIM} (or -1 for unknown)", start)
    return reader.values(f"{ndim}q", f"the {ndim} dimensions of {what}")


def _check_dims(reader: _Reader, shape: tuple[int, ...], what: str, start: int) -> None:
    if any(d < 0 for d in shape):
        raise reader.fail(f"{what} {shape} has a negative dimension; expected sizes >= 0", start)
    # numpy refuses a shape whose nonzero dimensions multiply past its index range, even
    # when another dimension is 0 and nothing is stored
    if _size([d for d in shape if d]) > _MAX_ELEMENTS:
        raise reader.fail(f"{what} {shape} is larger than any array can be; expected at most "
                          f"{_MAX_ELEMENTS} elements", start)


def _read_device_and_dtype(reader: _Reader, what: str) -> tuple[str, int, np.dtype]:
    """The i32 device type, i32 device id and i32 dtype flag that follow a record's shape."""
    start = reader.offset
    dev_type, dev_id, flag = reader.values("iii", f"the device type, device id and dtype flag of {what}")
    if dev_type not in DEVICE_TYPES:
        known = ", ".join(f"{code} ({name})" for code, name in DEVICE_TYPES.items())
        raise reader.fail(f"unknown device type {dev_type} in {what}; expected one of {known}", start)
    if dev_id < 0:
        raise reader.fail(f"device id {dev_id} of {what} is negative; expected >= 0", start + 4)
    return DEVICE_TYPES[dev_type], dev_id, _dtype_of_flag(reader, flag, what, start + 8)


def _dtype_of_flag(reader: _Reader, flag: int, what: str, at: int, *, index_only: bool = False) -> np.dtype:
    allowed = _INDEX_FLAGS if index_only else FLAG_DTYPES.keys()
    if flag not in allowed:
        known = ", ".join(f"{f}={FLAG_DTYPES[f]}" for f in sorted(allowed))
        raise reader.fail(f"unknown dtype flag {flag} for {what}; expected one of {known}", at)
    numpy_dtype = _DTYPE_CACHE.get(flag)
    if numpy_dtype is None:
        numpy_dtype = _DTYPE_CACHE.setdefault(flag, np.dtype(to_numpy(FLAG_DTYPES[flag])).newbyteorder("<"))
    return numpy_dtype


def _size(shape: tuple[int, ...] | list[int]) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


def _read_dense_tail(reader: _Reader, shape: tuple[int, ...], version: int, what: str) -> StoredArray:
    """Device, dtype and data of a dense record whose shape has been read."""
    device, dev_id, dtype = _read_device_and_dtype(reader, what)
    data = reader.array(_size(shape), dtype, f"the data of {what} (shape {shape})")
    return StoredArray(data.reshape(shape), version, device, dev_id)


def _read_legacy_record(reader: _Reader, first_word: int, what: str) -> StoredArray:
    """V1 (magic, then an i64 shape) or V0 (no magic: the first word is ndim, dims are u32)."""
    start = reader.offset - 4
    if first_word == V1_MAGIC:
        version = 1
        shape = _read_shape(reader, what)
        if shape is None:
            raise reader.fail(f"the ndim of {what} is -1, which the V1 layout does not allow", start + 4)
    else:
        version = 0
        if first_word > _MAX_NDIM:
            raise reader.fail(
                f"{what} starts with 0x{first_word:08X}, which is neither a record magic (0x{V3_MAGIC:08X}, "
                f"0x{V2_MAGIC:08X}, 0x{V1_MAGIC:08X}) nor a legacy ndim (0..{_MAX_NDIM})", start)
        shape = reader.values(f"{first_word}I", f"the {first_word} dimensions of {what}")
    _check_dims(reader, shape, f"the shape of {what}", start)
    if len(shape) == 0:  # before np shape semantics, ndim 0 meant "no array", and nothing follows
        return StoredArray(None, version)
    return _read_dense_tail(reader, shape, version, what)


def _read_sparse_tail(reader: _Reader, stype: int, storage_shape: tuple[int, ...],
                      shape: tuple[int, ...], what: str, start: int) -> StoredArray:
    device, dev_id, dtype = _read_device_and_dtype(reader, what)
    aux_layout = []
    for k in range(_AUX_COUNT[stype]):
        aux_what = f"aux array {k} of {what}"
        flag_at = reader.offset
        flag = reader.unpack("i", f"the dtype flag of {aux_what}")
        aux_dtype = _dtype_of_flag(reader, flag, aux_what, flag_at, index_only=True)
        aux_start = reader.offset
        aux_shape = _read_shape(reader, aux_what)
        if aux_shape is None or len(aux_shape) != 1:
            raise reader.fail(f"the shape of {aux_what} is {aux_shape}; expected one dimension", aux_start)
        _check_dims(reader, aux_shape, f"the shape of {aux_what}", aux_start)
        aux_layout.append((aux_dtype, aux_shape))
    data = reader.array(_size(storage_shape), dtype, f"the stored values of {what}")
    aux = [reader.array(_size(s), d, f"the data of aux array {k} of {what}")
           for k, (d, s) in enumerate(aux_layout)]
    if stype == 1:
        candidate = dict(stype="row_sparse", shape=shape, data=data.reshape(storage_shape), indices=aux[0])
    else:
        candidate = dict(stype="csr", shape=shape, data=data, indices=aux[1], indptr=aux[0])
    try:
        value = SparseArray(**candidate)  # type: ignore[arg-type]
    except ShapeError as err:
        raise reader.fail(f"inconsistent sparse record {what}: {err}", start) from None
    return StoredArray(value, 2, device, dev_id)


def _read_record(reader: _Reader, index: int) -> StoredArray:
    what = f"array {index}"
    start = reader.offset
    first_word = reader.unpack("I", f"the record magic of {what}")
    if first_word not in (V2_MAGIC, V3_MAGIC):
        return _read_legacy_record(reader, first_word, what)
    version = 3 if first_word == V3_MAGIC else 2
    stype = reader.unpack("i", f"the storage type of {what}")
    if stype not in STORAGE_TYPES:
        known = ", ".join(f"{code} ({name})" for code, name in STORAGE_TYPES.items())
        raise reader.fail(f"unknown storage type {stype} of {what}; expected one of {known}", start + 4)
    if version == 3 and stype != 0:
        raise reader.fail(f"{what} is {STORAGE_TYPES[stype]} in a V3 (numpy shape) record, "
                          "which MXNet allows only for dense storage", start + 4)
    storage_shape: tuple[int, ...] | None = None
    if stype != 0:
        sshape_start = reader.offset
        storage_shape = _read_shape(reader, f"the storage shape of {what}")
        if storage_shape is None:
            raise reader.fail(f"the storage shape of {what} has ndim -1; expected a known shape", sshape_start)
        _check_dims(reader, storage_shape, f"the storage shape of {what}", sshape_start)
    shape_start = reader.offset
    shape = _read_shape(reader, f"the shape of {what}")
    if version == 3:
        if shape is None or -1 in shape:  # unknown shape in numpy semantics: a none array
            return StoredArray(None, version)
    elif shape is None or len(shape) == 0:  # legacy semantics: ndim 0 is a none array
        if shape is None:
            raise reader.fail(f"the ndim of {what} is -1, which a V2 (legacy shape) record cannot hold; "
                              "expected ndim >= 0", shape_start)
        return StoredArray(None, version)
    _check_dims(reader, shape, f"the shape of {what}", shape_start)
    if stype == 0:
        return _read_dense_tail(reader, shape, version, what)
    assert storage_shape is not None
    return _read_sparse_tail(reader, stype, storage_shape, shape, what, start)


def _read_names(reader: _Reader, count: int) -> list[str]:
    start = reader.offset
    n_names = reader.unpack("Q", "the number of names")
    if n_names not in (0, count):
        raise reader.fail(f"the file has {count} arrays but {n_names} names; expected 0 or {count}", start)
    names: list[str] = []
    seen: set[str] = set()
    for i in range(n_names):
        length = reader.unpack("Q", f"the length of name {i}")
        name_start = reader.offset
        raw = reader.read(length, f"name {i} ({length} bytes of UTF-8)")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise reader.fail(f"name {i} is not valid UTF-8 ({err.reason} at byte {err.start})",
                              name_start) from None
        if name in seen:
            raise reader.fail(f"name {name!r} appears twice; expected unique names", name_start)
        seen.add(name)
        names.append(name)
    return names


def _read_file(reader: _Reader) -> tuple[list[StoredArray], list[str]]:
    header = reader.unpack("Q", "the file magic")
    if header != LIST_MAGIC:
        raise reader.fail(f"bad file magic 0x{header:X}; expected 0x{LIST_MAGIC:X} "
                          "(an MXNet NDArray file, as written by mx.nd.save)", 0)
    reader.unpack("Q", "the reserved word")  # MXNet writes 0 and never reads it back
    count_at = reader.offset
    count = reader.unpack("Q", "the number of arrays")
    if count * 4 > reader.size - reader.offset:  # every record takes at least 4 bytes
        raise reader.fail(f"the file claims {count} arrays, more than its {reader.size - reader.offset} "
                          "remaining bytes can hold", count_at)
    records = [_read_record(reader, i) for i in range(count)]
    names = _read_names(reader, count)
    if reader.offset != reader.size:
        raise reader.fail(f"{reader.size - reader.offset} unexpected bytes after the last name; "
                          "expected the end of the file")
    return records, names


@contextmanager
def _open_for_reading(source: Any) -> Iterator[_Reader]:
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source) if not isinstance(source, bytes) else source
        yield _Reader(io.BytesIO(data), len(data), "<bytes>")
    elif isinstance(source, str | os.PathLike):
        with open(source, "rb") as stream:
            yield _Reader(stream, os.fstat(stream.fileno()).st_size, os.fspath(source))
    elif hasattr(source, "read"):
        label = str(getattr(source, "name", "<stream>"))
        seekable = getattr(source, "seekable", lambda: False)()
        if seekable and hasattr(source, "readinto"):
            here = source.tell()
            size = source.seek(0, io.SEEK_END) - here
            source.seek(here)
            yield _Reader(source, size, label)
        else:  # a pipe or socket: its length is only known once it has been read
            data = source.read()
            if not isinstance(data, bytes | bytearray):
                raise MXKitError(f"{label} gave {type(data).__name__}, not bytes; open the file in binary "
                                 "mode ('rb')")
            yield _Reader(io.BytesIO(data), len(data), label)
    else:
        raise MXKitError(f"cannot read arrays from {type(source).__name__}; expected a file name, "
                         "a binary file object or bytes")


def load_stored_arrays(source: Any) -> tuple[list[StoredArray], list[str]]:
    """Every record of an MXNet NDArray file, with its device and layout version.

    Parameters
    ----------
    source : str, os.PathLike, binary file object or bytes
        The file; a file object is read from its current position to its end.

    Returns
    -------
    records : list of StoredArray
    names : list of str
        Empty for a file saved from a list, else one name per record.

    Raises
    ------
    FormatError
        If the file is truncated, corrupt, over-long or not an NDArray file.
    DTypeError
        If it holds bfloat16 data and the ``ml_dtypes`` package is missing.
    """
    with _open_for_reading(source) as reader:
        return _read_file(reader)


_SPARSE_MODES = ("dense", "keep")


def load_arrays(source: Any, *, sparse: str = "dense") -> list[Any] | dict[str, Any]:
    """Load a file written by ``mx.nd.save`` (MXNet 1.x) or :func:`save_arrays`.

    Parameters
    ----------
    source : str, os.PathLike, binary file object or bytes
        The file; a file object is read from its current position to its end.
    sparse : {"dense", "keep"}
        What a row_sparse or csr record becomes: a dense numpy array, or a :class:`SparseArray`.

    Returns
    -------
    list or dict
        A dict name -> array when the file has names, else a list. A "none" record (an
        NDArray without storage, which old MXNet versions could save) loads as ``None``.

    Raises
    ------
    FormatError
        If the file is truncated, corrupt, over-long or not an NDArray file.
    """
    if sparse not in _SPARSE_MODES:
        raise ConfigError(f"sparse={sparse!r} is not a choice; expected one of {', '.join(_SPARSE_MODES)}")
    records, names = load_stored_arrays(source)
    values = []
    for position, record in enumerate(records):
        value = record.value
        if isinstance(value, SparseArray) and sparse == "dense":
            try:
                value = value.todense()
            except FormatError as exc:
                where = os.fspath(source) if isinstance(source, str | os.PathLike) else "the data"
                label = repr(names[position]) if names else f"#{position}"
                raise FormatError(f"{where}: array {label}: {exc}") from None
        values.append(value)
    return dict(zip(names, values)) if names else values


def loads_arrays(data: bytes, *, sparse: str = "dense") -> list[Any] | dict[str, Any]:
    """Like :func:`load_arrays`, from the bytes of a file."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MXKitError(f"loads_arrays expects bytes, got {type(data).__name__}; use load_arrays for files")
    return load_arrays(data, sparse=sparse)


# --------------------------------------------------------------------------- writing


def _sparse_structure_problem(arr: SparseArray) -> str | None:
    """What is wrong with a sparse array's parts, or None when they agree."""
    shape = arr.shape
    if arr.stype not in ("row_sparse", "csr"):
        return f"stype {arr.stype!r} is not 'row_sparse' or 'csr'"
    if any(d < 0 for d in shape):
        return "dimensions must be >= 0"
    if not all(isinstance(a, np.ndarray) for a in (arr.data, arr.indices)):
        return "data and indices must be numpy arrays"
    if arr.indices.ndim != 1 or arr.indices.dtype.kind not in "iu":
        return f"indices must be a 1-d integer array, got {arr.indices.dtype} of shape {arr.indices.shape}"
    if arr.stype == "row_sparse":
        if len(shape) < 1:
            return "row_sparse needs at least one dimension"
        if arr.data.shape != (len(arr.indices), *shape[1:]):
            return f"data shape {arr.data.shape} != (len(indices), *shape[1:]) = {(len(arr.indices), *shape[1:])}"
        if len(arr.indices) and (arr.indices.min() < 0 or arr.indices.max() >= shape[0]
                                 or np.any(np.diff(arr.indices.astype(np.int64)) <= 0)):
            return f"row indices must be strictly increasing within [0, {shape[0]}), got {arr.indices.tolist()}"
        return None
    if len(shape) != 2:
        return "csr needs exactly two dimensions"
    indptr = arr.indptr
    if not isinstance(indptr, np.ndarray) or indptr.shape != (shape[0] + 1,) or indptr.dtype.kind not in "iu":
        got = None if indptr is None else getattr(indptr, "shape", indptr)
        return f"indptr must be an integer array of shape ({shape[0] + 1},), got {got}"
    if arr.data.shape != arr.indices.shape:
        return f"data shape {arr.data.shape} != indices shape {arr.indices.shape}"
    if indptr[0] != 0 or indptr[-1] != len(arr.data) or np.any(np.diff(indptr.astype(np.int64)) < 0):
        return f"indptr must rise from 0 to nnz={len(arr.data)}, got {indptr.tolist()}"
    if len(arr.indices) and (arr.indices.min() < 0 or arr.indices.max() >= shape[1]):
        return f"column indices must lie in [0, {shape[1]}), got {arr.indices.tolist()}"
    # as MXNet's check_format: columns strictly increase within each row (a repeated
    # column would leave the dense value ambiguous)
    rises = np.diff(arr.indices.astype(np.int64)) > 0
    row_starts = indptr[1:-1].astype(np.int64)
    crossing = row_starts[(row_starts > 0) & (row_starts < len(arr.indices))] - 1
    rises[crossing] = True
    if not rises.all():
        return f"column indices must strictly increase within each row, got {arr.indices.tolist()}"
    return None


def _as_savable(value: Any, what: str) -> np.ndarray | SparseArray:
    if isinstance(value, SparseArray):
        try:
            _flag_of(value.data.dtype)
        except DTypeError as err:
            raise DTypeError(f"{what} cannot be saved: {err}") from None
        return value
    if value is None:
        # MXNet writes a none array as a bare ndim-0 shape, but its Python cannot wrap one
        # when loading ("unknown storage type: -1"), so such a file would be unreadable there
        raise MXKitError(f"{what} is None; a none array cannot be saved in a file MXNet can load")
    if isinstance(value, np.ndarray | np.generic) or hasattr(value, "__array__"):
        arr = np.asarray(value)
        try:
            _flag_of(arr.dtype)
        except DTypeError as err:
            raise DTypeError(f"{what} cannot be saved: {err}") from None
        return arr
    raise MXKitError(f"{what} is a {type(value).__name__}; expected a numpy array "
                     "(or an object with __array__, or a SparseArray)")


def _normalise(data: Any) -> tuple[list[np.ndarray | SparseArray], list[str]]:
    if isinstance(data, Mapping):
        names = []
        for key in data:
            if not isinstance(key, str):
                raise MXKitError(f"array names must be str, got {key!r} ({type(key).__name__})")
            try:
                key.encode("utf-8")
            except UnicodeEncodeError as err:
                raise MXKitError(f"array name {key!r} cannot be written as UTF-8 ({err.reason}); "
                                 "expected text without lone surrogates") from None
            names.append(key)
        return [_as_savable(v, f"array {k!r}") for k, v in data.items()], names
    if isinstance(data, list | tuple):
        return [_as_savable(v, f"array {i}") for i, v in enumerate(data)], []
    if isinstance(data, np.ndarray | SparseArray) or hasattr(data, "__array__"):
        return [_as_savable(data, "the array")], []  # mx.nd.save accepts a single array too
    raise MXKitError(f"cannot save a {type(data).__name__}; expected a list of arrays, "
                     "a dict str -> array, or one array")


def _choose_version(values: list[np.ndarray | SparseArray], version: int | None) -> int:
    has_0d = any(isinstance(v, np.ndarray) and v.ndim == 0 for v in values)
    has_sparse = any(isinstance(v, SparseArray) for v in values)
    if version is None:
        version = 3 if has_0d else 2
    if version not in (2, 3):
        raise ConfigError(f"version={version!r} cannot be written; expected 2 (legacy shapes, what "
                          "mx.nd.save writes) or 3 (numpy shapes), or None to choose")
    if version == 2 and has_0d:
        raise ShapeError("a 0-d array needs version 3 (numpy shape semantics): in version 2 ndim 0 "
                         "means 'no array'; pass version=3 or reshape it to (1,)")
    if version == 3 and has_sparse:
        raise ShapeError("a sparse array cannot be written in version 3 (numpy shape semantics allow "
                         "only dense arrays); save sparse arrays in a separate version-2 file")
    return version


def _flag_of(dtype: np.dtype) -> int:
    # the name lookup behind dtype_flag costs microseconds; files hold many small arrays
    flag = _FLAG_CACHE.get(dtype)
    if flag is None:
        flag = _FLAG_CACHE.setdefault(dtype, dtype_flag(dtype))
    return flag


def _shape_bytes(shape: tuple[int, ...]) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def _little_endian(arr: np.ndarray) -> memoryview:
    """The bytes of ``arr`` in C order, little-endian, without a copy when they already are."""
    arr = np.ascontiguousarray(arr)
    swapped = arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big")
    if swapped and arr.dtype.itemsize > 1:
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr.reshape(-1).view(np.uint8).data


def _write_record(out: BinaryIO, value: np.ndarray | SparseArray, version: int) -> None:
    magic = V3_MAGIC if version == 3 else V2_MAGIC
    cpu = struct.pack("<ii", 1, 0)
    if isinstance(value, np.ndarray):
        out.write(struct.pack("<Ii", magic, 0) + _shape_bytes(value.shape) + cpu)
        out.write(struct.pack("<i", _flag_of(value.dtype)))
        out.write(_little_endian(value))
        return
    # MXNet keeps sparse indices as int64 whatever they were given as
    aux = [value.indices] if value.stype == "row_sparse" else [value.indptr, value.indices]
    aux64 = [np.asarray(a, dtype=np.int64) for a in aux]
    stype = 1 if value.stype == "row_sparse" else 2
    out.write(struct.pack("<Ii", magic, stype) + _shape_bytes(value.data.shape) + _shape_bytes(value.shape))
    out.write(cpu + struct.pack("<i", _flag_of(value.data.dtype)))
    for a in aux64:
        out.write(struct.pack("<i", DTYPE_FLAGS["int64"]) + _shape_bytes(a.shape))
    out.write(_little_endian(value.data))
    for a in aux64:
        out.write(_little_endian(a))


def _prepare(data: Any, version: int | None) -> tuple[list[np.ndarray | SparseArray], list[str], int]:
    """Checked values, names and the record version, before anything is written."""
    values, names = _normalise(data)
    return values, names, _choose_version(values, version)


def _write_file(out: BinaryIO, values: list[np.ndarray | SparseArray], names: list[str], chosen: int) -> None:
    out.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(values)))
    for value in values:
        _write_record(out, value, chosen)
    out.write(struct.pack("<Q", len(names)))
    for name in names:
        encoded = name.encode("utf-8")
        out.write(struct.pack("<Q", len(encoded)) + encoded)


def save_arrays(fname_or_file: Any, data: Any, *, version: int | None = None) -> None:
    """Save arrays in MXNet 1.x's NDArray file format (what ``mx.nd.save`` writes).

    Parameters
    ----------
    fname_or_file : str, os.PathLike or binary file object
        Where to write. A file name is written through a temporary file in the same folder
        and renamed into place, so a failed save never leaves half a file behind.
    data : list of arrays, dict str -> array, or one array
        numpy arrays (or objects with ``__array__``) of any dtype of
        :data:`mxkit.core.dtypes.DTYPE_FLAGS`, or :class:`SparseArray` values. Dict order
        is kept. Dense arrays are recorded on cpu(0). MXNet 1.9.1 itself cannot read the
        dtype flags 8 to 11 (int16, uint16, uint32, uint64): they load back only here.
    version : {None, 2, 3}
        Record layout. 2 is what ``mx.nd.save`` writes and ``mx.nd.load`` reads by default;
        3 (numpy shape semantics) is needed for 0-d arrays and must be loaded in MXNet
        under ``npx.set_np()``. None picks 3 when there is a 0-d array, else 2.

    Raises
    ------
    ShapeError
        If the arrays need both layouts (a 0-d array with a sparse array), or
        ``version=2`` is asked for a 0-d array.
    DTypeError
        If an array's dtype has no MXNet type flag (complex, object, strings, ...).
    """
    if isinstance(fname_or_file, str | os.PathLike):
        path = os.fspath(fname_or_file)
        prepared = _prepare(data, version)  # fail on bad input before touching the disk
        from mxkit.core.files import atomic_open

        with atomic_open(path, "wb") as out:  # the old file survives a failed or killed write
            _write_file(out, *prepared)
    elif hasattr(fname_or_file, "write"):
        _write_file(fname_or_file, *_prepare(data, version))
    else:
        raise MXKitError(f"cannot write arrays to {type(fname_or_file).__name__}; "
                         "expected a file name or a binary file object")


def dumps_arrays(data: Any, *, version: int | None = None) -> bytes:
    """The bytes :func:`save_arrays` would write for ``data``."""
    buffer = io.BytesIO()
    _write_file(buffer, *_prepare(data, version))
    return buffer.getvalue()


def dumps_record(value: np.ndarray) -> bytes:
    """One dense array as MXNet writes a single NDArray (``MXNDArraySaveRawBytes``, the
    ``handle`` of a pickled NDArray's state): a V2 record, no list header."""
    buffer = io.BytesIO()
    _write_record(buffer, _as_savable(np.asarray(value), "the array"), 2)
    return buffer.getvalue()


def loads_record(data: bytes) -> StoredArray:
    """The array of one record written by :func:`dumps_record` or MXNet (``MXNDArrayLoadFromRawBytes``).

    Raises
    ------
    FormatError
        When the bytes are not one whole record (naming the offset and what was expected).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MXKitError(f"loads_record expects bytes, got {type(data).__name__}")
    raw = bytes(data)
    reader = _Reader(io.BytesIO(raw), len(raw), "NDArray record")
    record = _read_record(reader, 0)
    if reader.offset != len(raw):
        raise reader.fail(f"{len(raw) - reader.offset} bytes follow the record; expected one record alone")
    return record


__all__ = [
    "DEVICE_TYPES",
    "LIST_MAGIC",
    "STORAGE_TYPES",
    "SparseArray",
    "StoredArray",
    "V1_MAGIC",
    "V2_MAGIC",
    "V3_MAGIC",
    "dumps_arrays",
    "dumps_record",
    "load_arrays",
    "load_stored_arrays",
    "loads_arrays",
    "loads_record",
    "save_arrays",
]
