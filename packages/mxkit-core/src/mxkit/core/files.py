"""Durable writes of user files: the old file stays whole until the new one is complete.

Every writer of mxkit (parameters, symbol JSON, optimizer states, RecordIO, lists,
traces) writes through :func:`atomic_write`, :func:`atomic_open` or :class:`AtomicFile`:

1. a temporary file is created in the target's directory with ``O_CREAT | O_EXCL |
   O_NOFOLLOW`` and an unpredictable name (a planted symlink or file at that name is
   never followed or reused);
2. the data is written, flushed and ``fsync``-ed;
3. the temporary file is renamed over the target (``os.replace``: atomic on POSIX),
   and the directory is ``fsync``-ed so the rename itself survives a power cut.

If anything fails (disk full, a kill, an exception in the caller) the target is
untouched. Temporaries left by a writer that was killed are recognised by their name
(``.<target>.mxkit-tmp-<pid>-<random>``) and removed by the next save of the same
target once process ``<pid>`` no longer exists.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from typing import IO, Any

TEMP_MARKER = ".mxkit-tmp-"
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NAME_ATTEMPTS = 16


def _temp_prefix(target: str) -> str:
    directory, name = os.path.split(target)
    return os.path.join(directory, f".{name}{TEMP_MARKER}")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    except OSError:
        return True  # cannot tell: keep its file
    return True


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[str]:
    """Remove the temporaries of ``target`` left by writers that no longer run.

    Returns the paths removed. Only names made by this module for this target are
    considered, and only when the process id in the name does not exist any more.
    """
    path = os.path.abspath(os.fspath(target))
    directory, name = os.path.split(path)
    prefix = f".{name}{TEMP_MARKER}"
    removed: list[str] = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        if not entry.startswith(prefix):
            continue
        pid_text, _, _ = entry[len(prefix):].partition("-")
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid == os.getpid() or _process_exists(pid):
            continue
        stale = os.path.join(directory, entry)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)  # unlink removes a symlink itself, never what it points to
            removed.append(stale)
    return removed


def _create_temporary(target: str) -> tuple[int, str]:
    prefix = _temp_prefix(target)
    for _ in range(_NAME_ATTEMPTS):
        candidate = f"{prefix}{os.getpid()}-{secrets.token_hex(8)}"
        try:
            return os.open(candidate, _CREATE_FLAGS, 0o666), candidate
        except FileExistsError:
            continue  # taken (or planted): pick another name
    raise FileExistsError(errno.EEXIST, f"could not create a temporary file next to {target!r} "
                                        f"after {_NAME_ATTEMPTS} attempts", prefix)


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. a platform without directory handles
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


class AtomicFile:
    """A file being written to a temporary next to ``target``; :meth:`commit` puts it in
    place, :meth:`discard` (or an exception inside ``with``) throws it away.

    Parameters
    ----------
    target : str or path
        The file to (re)place.
    mode : {"wb", "w"}
        Binary or text.
    buffering : int
        Passed to :func:`open`.
    encoding : str, optional
        For text mode (UTF-8 by default).

    Notes
    -----
    Use it as a stream (``write``, ``tell``, ``flush``); a streaming writer (RecordIO)
    keeps it open for as long as it writes. If the target exists, the new file gets its
    permission bits; a symlink at the target is replaced, not written through.
    """

    def __init__(self, target: str | os.PathLike[str], mode: str = "wb", buffering: int = -1,
                 encoding: str | None = None):
        if mode not in ("wb", "w"):
            raise ValueError(f"AtomicFile mode must be 'wb' or 'w', got {mode!r}")
        self.target = os.path.abspath(os.fspath(target))
        remove_stale_temporaries(self.target)
        fd, self.temp_path = _create_temporary(self.target)
        try:
            with contextlib.suppress(OSError):
                os.fchmod(fd, os.stat(self.target).st_mode & 0o7777)
            if mode == "w":
                self.file: IO[Any] = os.fdopen(fd, "w", buffering=buffering, encoding=encoding or "utf-8")
            else:
                self.file = os.fdopen(fd, "wb", buffering=buffering)
        except BaseException:
            os.close(fd)
            os.unlink(self.temp_path)
            raise
        self.closed = False

    def write(self, data: Any) -> int:
        """Write ``data`` to the temporary file."""
        return self.file.write(data)

    def tell(self) -> int:
        """Bytes (or text position) written so far."""
        return self.file.tell()

    def flush(self) -> None:
        """Flush Python's buffer (not a commit)."""
        self.file.flush()

    def commit(self) -> None:
        """Flush, fsync, rename over the target and fsync the directory."""
        if self.closed:
            return
        self.closed = True
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temp_path, self.target)
        except BaseException:
            self._remove_temporary()
            raise
        _fsync_directory(os.path.dirname(self.target))

    def discard(self) -> None:
        """Throw the temporary away; the target stays as it was."""
        if self.closed:
            return
        self.closed = True
        self._remove_temporary()

    close = commit

    def _remove_temporary(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp_path)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


@contextlib.contextmanager
def atomic_open(target: str | os.PathLike[str], mode: str = "wb", encoding: str | None = None) -> Iterator[IO[Any]]:
    """``with atomic_open(path, "w") as handle:`` writes ``path`` durably: the handle is
    a temporary file that replaces ``path`` only when the block ends without an error."""
    atomic = AtomicFile(target, mode, encoding=encoding)
    try:
        yield atomic.file
    except BaseException:
        atomic.discard()
        raise
    atomic.commit()


def atomic_write(target: str | os.PathLike[str], data: bytes | str) -> None:
    """Replace ``target`` with ``data`` (bytes, or str written as UTF-8), durably."""
    with atomic_open(target, "w" if isinstance(data, str) else "wb") as handle:
        handle.write(data)


__all__ = ["AtomicFile", "atomic_open", "atomic_write", "remove_stale_temporaries"]
