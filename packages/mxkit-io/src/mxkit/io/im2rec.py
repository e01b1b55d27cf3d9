"""im2rec: image folders to ``.lst`` lists, and lists to ``.rec`` + ``.idx`` files.

The workflow and file formats of MXNet's ``tools/im2rec.py``: ``make_list`` walks a folder
(class sub-folders with ``recursive``), shuffles with the same seed, splits into train /
val / test lists of ``index<TAB>label<TAB>path`` lines; ``pack_list`` encodes every listed
image (optionally center-cropped, resized and re-encoded, or passed through as the file's
bytes) with several processes and writes them in list order, keyed by the list index.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from mxkit.core.errors import ConfigError, FormatError
from mxkit.io.recordio import IRHeader, MXIndexedRecordIO, pack, pack_img

__all__ = ["ListItem", "PackOptions", "find_list_files", "list_images", "make_list", "pack_list", "read_list"]

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")


@dataclass(frozen=True)
class ListItem:
    """One line of a ``.lst`` file."""

    index: int
    path: str
    labels: tuple[float, ...]


def list_images(root: str, recursive: bool = False, exts: Sequence[str] = DEFAULT_EXTS) -> list[ListItem]:
    """The images under ``root`` in MXNet's order; with ``recursive`` each folder is a class.

    Classes are numbered in the order the sorted walk first meets an image in a folder.
    """
    if not os.path.isdir(root):
        raise ConfigError(f"image root {root!r} is not a directory; pass the folder holding the images")
    exts = tuple(e.lower() for e in exts)
    items = []
    if recursive:
        classes: dict[str, int] = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(path, name)
                if os.path.isfile(full) and os.path.splitext(name)[1].lower() in exts:
                    label = classes.setdefault(path, len(classes))
                    items.append(ListItem(len(items), os.path.relpath(full, root), (float(label),)))
    else:
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if os.path.isfile(full) and os.path.splitext(name)[1].lower() in exts:
                items.append(ListItem(len(items), os.path.relpath(full, root), (0.0,)))
    return items


def write_list(path: str, items: Sequence[ListItem]) -> None:
    """Write ``items`` as a ``.lst`` file (labels printed with ``%f``, as MXNet), durably."""
    from mxkit.core.files import atomic_open

    with atomic_open(path, "w") as handle:
        for item in items:
            labels = "".join(f"{label:f}\t" for label in item.labels)
            handle.write(f"{item.index}\t{labels}{item.path}\n")


def make_list(
    prefix: str,
    root: str,
    recursive: bool = False,
    exts: Sequence[str] = DEFAULT_EXTS,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
    shuffle: bool = True,
    chunks: int = 1,
) -> list[str]:
    """Write the ``.lst`` files of the images under ``root``; return their paths.

    The split follows MXNet's im2rec: per chunk, the first ``test_ratio`` goes to
    ``PREFIX_test.lst``, the next ``train_ratio`` to ``PREFIX_train.lst`` and the rest to
    ``PREFIX_val.lst``; with ``train_ratio == 1`` everything goes to ``PREFIX.lst``.
    """
    if not (0 <= test_ratio <= 1 and 0 < train_ratio <= 1 and train_ratio + test_ratio <= 1):
        raise ConfigError(
            f"train_ratio ({train_ratio}) and test_ratio ({test_ratio}) must be fractions summing to at most 1"
        )
    if chunks < 1:
        raise ConfigError(f"chunks must be at least 1, got {chunks}")
    items = list_images(root, recursive, exts)
    if not items:
        raise ConfigError(f"no images with extensions {', '.join(exts)} under {root!r}")
    if shuffle:
        random.Random(100).shuffle(items)  # MXNet's fixed seed: the same lists as its tool
    chunk_size = (len(items) + chunks - 1) // chunks
    written = []
    for chunk_index in range(chunks):
        chunk = items[chunk_index * chunk_size:(chunk_index + 1) * chunk_size]
        suffix = f"_{chunk_index}" if chunks > 1 else ""
        train_end = int(chunk_size * train_ratio)
        test_end = int(chunk_size * test_ratio)
        if train_ratio == 1.0:
            outputs = [(f"{prefix}{suffix}.lst", chunk)]
        else:
            outputs = []
            if test_ratio:
                outputs.append((f"{prefix}{suffix}_test.lst", chunk[:test_end]))
            if train_ratio + test_ratio < 1.0:
                outputs.append((f"{prefix}{suffix}_val.lst", chunk[test_end + train_end:]))
            outputs.append((f"{prefix}{suffix}_train.lst", chunk[test_end:test_end + train_end]))
        for path, part in outputs:
            write_list(path, part)
            written.append(path)
    return written


def read_list(path: str) -> Iterator[ListItem]:
    """The items of a ``.lst`` file; a malformed line is an error naming it."""
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            fields = [field.strip() for field in line.strip().split("\t")]
            try:
                if len(fields) < 3:
                    raise ValueError
                yield ListItem(int(fields[0]), fields[-1], tuple(float(v) for v in fields[1:-1]))
            except ValueError:
                raise FormatError(
                    f"list file {path!r} line {line_number} is {line.rstrip()!r}; expected "
                    f"'index<TAB>label[<TAB>label...]<TAB>relative/path'"
                ) from None


@dataclass(frozen=True)
class PackOptions:
    """How ``pack_list`` turns each image into a record (MXNet im2rec's options)."""

    root: str
    pass_through: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    color: int = 1
    encoding: str = ".jpg"
    pack_label: bool = False


def encode_item(options: PackOptions, item: ListItem) -> bytes | str:
    """The record of one list item, or an error message when the image cannot be read."""
    label: Any = list(item.labels) if options.pack_label and len(item.labels) > 1 else item.labels[0]
    header = IRHeader(0, label, item.index, 0)
    full = os.path.join(options.root, item.path)
    if options.pass_through:
        try:
            with open(full, "rb") as handle:
                return pack(header, handle.read())
        except OSError as error:
            return f"cannot read {full!r}: {error.strerror}"
    from mxkit.io.image import cv2_module

    cv2 = cv2_module()
    img = cv2.imread(full, options.color)
    if img is None:
        return f"cannot decode {full!r} as an image"
    if options.center_crop:
        rows, cols = img.shape[:2]
        if rows > cols:
            margin = (rows - cols) // 2
            img = img[margin:margin + cols]
        else:
            margin = (cols - rows) // 2
            img = img[:, margin:margin + rows]
    if options.resize:
        rows, cols = img.shape[:2]
        size = (options.resize, rows * options.resize // cols) if rows > cols else \
            (cols * options.resize // rows, options.resize)
        img = cv2.resize(img, size)
    return pack_img(header, img, quality=options.quality, img_fmt=options.encoding)


def _encode_task(args: tuple[PackOptions, ListItem]) -> bytes | str:
    return encode_item(*args)


class _Progress:
    """A one-line progress bar on a terminal stream (redrawn at most 10 times a second)."""

    def __init__(self, total: int, stream: IO[str] | None):
        self.total = total
        self.stream = stream
        self.started = time.perf_counter()
        self.last_draw = 0.0

    def update(self, done: int, force: bool = False) -> None:
        if self.stream is None:
            return
        now = time.perf_counter()
        if not force and now - self.last_draw < 0.1:
            return
        self.last_draw = now
        width = 30
        filled = width * done // max(self.total, 1)
        rate = done / max(now - self.started, 1e-9)
        bar = "=" * filled + ">" * (filled < width) + " " * (width - filled - 1)
        self.stream.write(f"\r[{bar}] {done}/{self.total} images, {rate:.0f}/s")
        if force:
            self.stream.write("\n")
        self.stream.flush()


def pack_list(
    list_path: str,
    options: PackOptions,
    num_workers: int = 1,
    progress: IO[str] | None = None,
    warnings: IO[str] | None = None,
) -> tuple[int, int]:
    """Pack the images of ``list_path`` into ``.rec`` + ``.idx`` beside it.

    Records are written in list order with the list index as key, whatever the number of
    worker processes. Images that cannot be read are skipped with a warning on
    ``warnings`` (stderr by default). Returns ``(written, skipped)``.
    """
    if num_workers < 1:
        raise ConfigError(f"num_workers must be at least 1, got {num_workers}")
    items = list(read_list(list_path))
    base = os.path.splitext(list_path)[0]
    warnings = warnings if warnings is not None else sys.stderr
    bar = _Progress(len(items), progress)
    written = skipped = 0
    tasks = [(options, item) for item in items]
    with MXIndexedRecordIO(base + ".idx", base + ".rec", "w") as writer:
        if num_workers == 1:
            results: Iterator[bytes | str] = map(_encode_task, tasks)
            pool = None
        else:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            pool = multiprocessing.get_context(method).Pool(num_workers)
            results = pool.imap(_encode_task, tasks, chunksize=max(1, min(64, len(tasks) // (4 * num_workers))))
        try:
            for done, (item, record) in enumerate(zip(items, results), start=1):
                if isinstance(record, str):
                    warnings.write(f"im2rec: skipping list index {item.index}: {record}\n")
                    skipped += 1
                else:
                    writer.write_idx(item.index, record)
                    written += 1
                bar.update(done)
        finally:
            if pool is not None:
                pool.close()
                pool.join()
    bar.update(len(items), force=True)
    return written, skipped


def find_list_files(prefix: str) -> list[str]:
    """The ``.lst`` files a prefix names: the file itself, or every ``PREFIX*.lst`` beside it."""
    if prefix.endswith(".lst") and os.path.isfile(prefix):
        return [prefix]
    directory = prefix if os.path.isdir(prefix) else (os.path.dirname(prefix) or ".")
    found = sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.endswith(".lst") and os.path.join(directory, name).startswith(prefix)
    )
    if not found:
        sibling = prefix.rstrip(os.sep) + ".lst"
        if os.path.isdir(prefix) and os.path.isfile(sibling):
            # `--list` wrote PREFIX.lst beside the folder, but MXNet's rule reads a folder
            # prefix as "every .lst inside it": say so instead of contradicting the last step
            raise ConfigError(f"no .lst file inside the folder {prefix!r}: a prefix that is a folder means the .lst "
                              f"files in it (MXNet's rule), and {sibling!r} is beside it; give {sibling!r} as the "
                              f"prefix, or use a prefix that is not the image folder (e.g. {prefix.rstrip(os.sep)}"
                              f"-data)")
        raise ConfigError(f"no .lst file with prefix {prefix!r}; make one first with `mxkit im2rec --list`")
    return found
