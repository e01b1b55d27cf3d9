"""MXNet-compatible RecordIO files: ``MXRecordIO``, ``MXIndexedRecordIO`` and IRHeader packing.

Files written here are byte-identical to those of MXNet 1.x (dmlc-core's writer), and
MXNet's files read back exactly. Paths may be local files or fsspec URIs (``memory://``,
``s3://``, ...). A reader opened in one process re-opens itself after ``fork``, so
worker processes of a data loader each get their own file position.
"""

from __future__ import annotations

import numbers
import os
import struct
import weakref
from collections.abc import Callable
from typing import IO, Any, NamedTuple

import numpy as np
from mxkit.core.errors import ConfigError, FormatError, MXKitError
from mxkit.io._format import READ_BUFFER_BYTES, RecordReader, encode_record
from mxkit.io._streams import file_size, index_lines, open_binary, open_binary_durably, open_text_durably

__all__ = [
    "IRHeader",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "RecordKeyError",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]


# Open readers read through their RecordReader's bound ``read`` (no per-record checks).
# A forked child must not share the parent's file position, so after a fork every such
# shortcut is removed and the next ``read`` goes through the checks, which re-open.
_fast_readers: weakref.WeakSet[MXRecordIO] = weakref.WeakSet()


def _drop_fast_paths_after_fork() -> None:
    for record_file in list(_fast_readers):
        record_file.__dict__.pop("read", None)
    _fast_readers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_fast_paths_after_fork)

#: Small records are gathered into writes of this size; large ones are written directly.
WRITE_BUFFER_BYTES = 1 << 20


class RecordKeyError(MXKitError, KeyError):
    """A key was asked of an indexed record file whose index does not have it."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


class MXRecordIO:
    """Reads or writes a sequence of records (MXNet's ``mx.recordio.MXRecordIO``).

    Parameters
    ----------
    uri : str or path
        The ``.rec`` file: a local path or an fsspec URI.
    flag : {"r", "w"}
        Read or write.

    Examples
    --------
    >>> with MXRecordIO("data.rec", "w") as writer:      # doctest: +SKIP
    ...     writer.write(b"record 0")
    >>> MXRecordIO("data.rec", "r").read()                # doctest: +SKIP
    b'record 0'
    """

    def __init__(self, uri: str | os.PathLike[str], flag: str):
        if flag not in ("r", "w"):
            raise ConfigError(f"MXRecordIO flag must be 'r' (read) or 'w' (write), got {flag!r}")
        self.uri = os.fspath(uri)
        self.flag = flag
        self.writable = flag == "w"
        self.is_open = False
        self.pid: int | None = None
        self._file: IO[bytes] | None = None
        self._reader: RecordReader | None = None
        self.open()

    def open(self) -> None:
        """Open the file (called by the constructor, ``reset`` and after a fork)."""
        if self.writable:
            # a local file is written to a temporary and renamed over the target at close
            # (mxkit.core.files): a full disk or a kill mid-write leaves the old file whole
            self._file = open_binary_durably(self.uri, buffering=WRITE_BUFFER_BYTES)
        else:
            self._file = open_binary(self.uri, "rb", buffering=READ_BUFFER_BYTES)
        self._reader = None if self.writable else RecordReader(self._file, self.uri)
        self.is_open = True
        self.pid = os.getpid()
        if self._reader is not None:
            self.read = self._reader.read  # type: ignore[method-assign]
            _fast_readers.add(self)

    def close(self) -> None:
        """Close the file; a closed reader or writer can be re-opened with ``open``.

        A writer's file replaces the target only now (until then the old file, if any,
        is what readers see)."""
        self._release(commit=True)

    def discard(self) -> None:
        """Close a writer without replacing the target: what was written is dropped."""
        self._release(commit=False)

    def _release(self, commit: bool) -> None:
        if not self.is_open:
            return
        assert self._file is not None
        self.__dict__.pop("read", None)
        _fast_readers.discard(self)
        # closed from here on even if the commit fails (a full disk): a second close,
        # e.g. from __del__, must not put anything in place
        handle, self._file = self._file, None
        self._reader = None
        self.is_open = False
        self.pid = None
        if not commit and hasattr(handle, "discard"):
            handle.discard()
        else:
            handle.close()

    def reset(self) -> None:
        """Go back to the first record (a writer starts the file over)."""
        self.close()
        self.open()

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        # a writer whose block raised keeps the old file rather than a partial one
        if exc_type is not None and self.writable:
            self.discard()
        else:
            self.close()

    def __del__(self) -> None:
        # A reader only lets go of its file: ``MXRecordIO(path, "r").read()`` drops the
        # object while its fast ``read`` (the RecordReader's) still runs, and the file
        # closes when that reader goes. A writer dropped without close() commits.
        try:
            if self.writable:
                self.close()
            else:
                self.__dict__.pop("read", None)
                _fast_readers.discard(self)
                self._file = None
                self._reader = None
                self.is_open = False
        except Exception:  # interpreter shutdown may have torn down modules
            pass

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("read", None)
        state["_file"] = None
        state["_reader"] = None
        state["pid"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        was_open = state["is_open"]
        self.__dict__.update(state)
        self.is_open = False
        if was_open:
            self.open()

    def _check_pid(self, allow_reset: bool) -> None:
        """Re-open in a forked child: the parent's handle shares its file position."""
        if self.pid == os.getpid():
            return
        if not self.is_open:
            raise MXKitError(f"record file {self.uri!r} is closed; call open() before using it")
        if allow_reset:
            self.reset()
        else:
            raise MXKitError(
                f"record file {self.uri!r} was opened for writing in process {self.pid} and cannot be "
                f"written from process {os.getpid()}; open a writer in each process instead"
            )

    def _require(self, writing: bool) -> None:
        if writing != self.writable:
            wanted = "written" if writing else "read"
            raise MXKitError(
                f"record file {self.uri!r} is open with flag {self.flag!r} and cannot be {wanted}; "
                f"open it with flag {'w' if writing else 'r'!r}"
            )

    def write(self, buf: bytes | bytearray | memoryview) -> None:
        """Append one record whose payload is ``buf``."""
        self._require(writing=True)
        self._check_pid(allow_reset=False)
        write = self._file.write  # type: ignore[union-attr]
        for piece in encode_record(buf):
            write(piece)

    def read(self) -> bytes | None:
        """The next record's payload, or None after the last record."""
        # While open in its own process, a reader's ``read`` is its RecordReader's (set by
        # ``open``); this method runs when the file is closed, written, or after a fork.
        self._require(writing=False)
        self._check_pid(allow_reset=True)
        return self._reader.read()  # type: ignore[union-attr]

    def tell(self) -> int:
        """Byte offset of the next record to read or write."""
        if not self.is_open:
            raise MXKitError(f"record file {self.uri!r} is closed; call open() before tell()")
        if self._reader is not None:
            self._check_pid(allow_reset=True)
            return self._reader.tell()
        return self._file.tell()  # type: ignore[union-attr]


class MXIndexedRecordIO(MXRecordIO):
    """A record file with an index for random access (MXNet's ``MXIndexedRecordIO``).

    Parameters
    ----------
    idx_path : str or path
        The index: text lines ``key<TAB>offset``.
    uri : str or path
        The ``.rec`` file.
    flag : {"r", "w"}
        Read or write.
    key_type : callable
        Converts the keys of the index file (``int`` by default).
    """

    def __init__(
        self,
        idx_path: str | os.PathLike[str],
        uri: str | os.PathLike[str],
        flag: str,
        key_type: Callable[[str], Any] = int,
    ):
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self.idx: dict[Any, int] = {}
        self.keys: list[Any] = []
        self.fidx: IO[str] | None = None
        self._size = 0
        super().__init__(uri, flag)

    def open(self) -> None:
        """Open the record file and its index."""
        super().open()
        self.idx = {}
        self.keys = []
        if self.writable:
            self.fidx = open_text_durably(self.idx_path)
            return
        self.fidx = None
        self._size = file_size(self.uri)
        for line_number, line in index_lines(self.idx_path):
            if not line.strip():
                continue
            fields = line.strip().split("\t")
            try:
                key = self.key_type(fields[0])
                offset = int(fields[1])
            except (IndexError, ValueError):
                raise FormatError(
                    f"index file {self.idx_path!r} line {line_number} is {line.rstrip()!r}; "
                    f"expected 'key<TAB>offset' (rebuild it with `mxkit rec index`)"
                ) from None
            self.idx[key] = offset
            self.keys.append(key)

    def _release(self, commit: bool) -> None:
        # the record file is put in place first: an index never names a missing file
        if not self.is_open:
            return
        index, self.fidx = self.fidx, None
        try:
            super()._release(commit)
        except BaseException:
            if index is not None and hasattr(index, "discard"):
                index.discard()  # the records were not put in place: neither is their index
            raise
        if index is not None:
            if not commit and hasattr(index, "discard"):
                index.discard()
            else:
                index.close()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx: Any) -> None:
        """Position the reader at the record with key ``idx``."""
        self._require(writing=False)
        self._check_pid(allow_reset=True)
        try:
            offset = self.idx[idx]
        except KeyError:
            sample = ", ".join(repr(k) for k in self.keys[:5])
            raise RecordKeyError(
                f"key {idx!r} is not in the index {self.idx_path!r} ({len(self.keys)} keys, "
                f"e.g. {sample})"
            ) from None
        if offset < 0 or offset >= self._size or offset % 4:
            raise FormatError(
                f"index {self.idx_path!r} entry for key {idx!r} points at byte offset {offset}, "
                f"which is not a record head of {self.uri!r} (size {self._size} bytes; heads are "
                f"4-byte aligned offsets below the size); rebuild the index with `mxkit rec index`"
            )
        self._reader.seek(offset)  # type: ignore[union-attr]

    def read_idx(self, idx: Any) -> bytes:
        """The payload of the record with key ``idx``."""
        self.seek(idx)
        record = self.read()
        if record is None:  # unreachable for a valid offset below the size; kept as a guard
            raise FormatError(f"no record at the offset of key {idx!r} in {self.uri!r}")
        return record

    def write_idx(self, idx: Any, buf: bytes | bytearray | memoryview) -> None:
        """Append a record with key ``idx`` and record its offset in the index."""
        key = self.key_type(idx)
        offset = self.tell()
        self.write(buf)
        assert self.fidx is not None
        self.fidx.write(f"{key}\t{offset}\n")
        self.idx[key] = offset
        self.keys.append(key)


class IRHeader(NamedTuple):
    """The header that MXNet's image records start with.

    ``flag`` is 0 for a scalar ``label``; for a vector label it is the label's length and
    the float32 values follow the header. ``id`` and ``id2`` are free 64-bit integers
    (im2rec stores the image index in ``id``).
    """

    flag: int
    label: Any
    id: int
    id2: int


_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header: IRHeader | tuple[Any, ...], s: bytes) -> bytes:
    """Pack an IRHeader and a payload into one record (MXNet's ``recordio.pack``).

    A numeric ``label`` is stored in the header (flag 0); a sequence or array is stored
    as float32 values after the header and ``flag`` becomes its length.
    """
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *header) + bytes(s)


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    """Split a record into its IRHeader and payload (MXNet's ``recordio.unpack``).

    A vector label comes back as a read-only float32 array in ``header.label``.
    """
    if len(s) < _IR_SIZE:
        raise FormatError(
            f"a record of {len(s)} bytes is too short for an IRHeader ({_IR_SIZE} bytes); "
            f"was it written with recordio.pack?"
        )
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise FormatError(
                f"the IRHeader declares a vector label of {header.flag} float32 values "
                f"({4 * header.flag} bytes) but only {len(s)} bytes follow the header"
            )
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[4 * header.flag:]
    return header, s


def pack_img(
    header: IRHeader | tuple[Any, ...], img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg"
) -> bytes:
    """Encode an image with OpenCV and pack it with ``header`` (MXNet's ``pack_img``).

    Parameters
    ----------
    header : IRHeader
        The record's header.
    img : numpy.ndarray
        HxW or HxWx3 uint8 image in OpenCV's BGR order.
    quality : int
        JPEG quality 0-100 for ``.jpg``; PNG compression level 0-9 for ``.png``.
    img_fmt : str
        ``.jpg``/``.jpeg`` or ``.png``.
    """
    from mxkit.io.image import imencode

    return pack(header, imencode(img, img_fmt, quality))


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """Unpack a record made by ``pack_img`` into its header and decoded BGR image."""
    from mxkit.io.image import imdecode

    header, payload = unpack(s)
    return header, imdecode(payload, iscolor)
