"""Opening record files: plain local paths with ``open``, URIs through fsspec.

Local files take the fast built-in path and need nothing beyond the standard library;
``file://``, ``memory://``, ``s3://``, ``hdfs://`` and every other protocol go through
fsspec (the optional extra ``mxkit-io[fsspec]``) and its drivers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, Any

from mxkit.core.errors import FormatError, MissingComponentError

#: Bytes read per refill during sequential scans (the size dmlc-core's InputSplit uses).
SEQUENTIAL_CHUNK_BYTES = 8 << 20


def is_uri(path: str) -> bool:
    """True when ``path`` names a protocol (``scheme://...``) rather than a local file."""
    return "://" in path


def _fsspec() -> Any:
    try:
        import fsspec
    except ModuleNotFoundError:
        raise MissingComponentError(
            "reading or writing a URI (scheme://...) needs fsspec, which is not installed; "
            "install it with `pip install mxkit-io[fsspec]` (plus the driver of the protocol, "
            "e.g. s3fs for s3://), or pass a local file path"
        ) from None
    return fsspec


def open_binary(path: str | os.PathLike[str], mode: str, buffering: int = -1) -> IO[bytes]:
    """Open ``path`` for binary reading (``"rb"``) or writing (``"wb"``/``"ab"``).

    ``buffering`` sets the buffer size of local files (fsspec files keep their own).
    """
    text = os.fspath(path)
    if is_uri(text):
        if text.startswith("file://"):
            return open(text[len("file://"):], mode, buffering=buffering)  # the caller owns the handle
        fs_file = _fsspec().open(text, mode)
        return fs_file.open()  # type: ignore[no-any-return]
    return open(text, mode, buffering=buffering)  # the caller owns the handle


def open_binary_durably(path: str | os.PathLike[str], buffering: int = -1) -> Any:
    """Open ``path`` for writing so that it is replaced only when the handle is closed.

    A local path gets a :class:`mxkit.core.files.AtomicFile` (a temporary next to it,
    fsync-ed and renamed over it at ``close()``; ``discard()`` drops it); a URI is
    opened through fsspec as by :func:`open_binary` (its store decides what a partial
    write leaves).
    """
    text = os.fspath(path)
    if is_uri(text) and not text.startswith("file://"):
        return open_binary(text, "wb", buffering=buffering)
    if text.startswith("file://"):
        text = text[len("file://"):]
    from mxkit.core.files import AtomicFile

    return AtomicFile(text, "wb", buffering=buffering)


def open_text_durably(path: str | os.PathLike[str]) -> Any:
    """:func:`open_binary_durably` for UTF-8 text (index and list files)."""
    text = os.fspath(path)
    if is_uri(text) and not text.startswith("file://"):
        return open_text(text, "w")
    if text.startswith("file://"):
        text = text[len("file://"):]
    from mxkit.core.files import AtomicFile

    return AtomicFile(text, "w", encoding="utf-8")


def index_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of an index or list file, decoded as UTF-8.

    Raises
    ------
    FormatError
        For a line that is not UTF-8, naming the file, the line and its byte offset.
    """
    offset = 0
    with open_binary(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                yield line_number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(
                    f"{os.fspath(path)!r} line {line_number} (byte offset {offset + exc.start}) is not UTF-8 "
                    f"text ({exc.reason}); an index holds 'key<TAB>offset' lines (rebuild it with "
                    f"`mxkit rec index`)") from None
            offset += len(raw)


def open_text(path: str | os.PathLike[str], mode: str) -> IO[str]:
    """Open ``path`` as UTF-8 text (index and list files), local or through fsspec."""
    text = os.fspath(path)
    if is_uri(text) and not text.startswith("file://"):
        return _fsspec().open(text, mode, encoding="utf-8").open()  # type: ignore[no-any-return]
    if text.startswith("file://"):
        text = text[len("file://"):]
    return open(text, mode, encoding="utf-8")


def file_size(path: str | os.PathLike[str]) -> int:
    """Size in bytes of the file at ``path`` (local or URI)."""
    text = os.fspath(path)
    if is_uri(text) and not text.startswith("file://"):
        fs, inner = _fsspec().core.url_to_fs(text)
        return int(fs.size(inner))
    if text.startswith("file://"):
        text = text[len("file://"):]
    return os.path.getsize(text)


def exists(path: str | os.PathLike[str]) -> bool:
    """True when a file exists at ``path`` (local or URI)."""
    text = os.fspath(path)
    if is_uri(text) and not text.startswith("file://"):
        fs, inner = _fsspec().core.url_to_fs(text)
        return bool(fs.exists(inner))
    if text.startswith("file://"):
        text = text[len("file://"):]
    return os.path.exists(text)
