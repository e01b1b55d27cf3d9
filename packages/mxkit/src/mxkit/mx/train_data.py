"""The data of ``mxkit train``: scikit-learn's digits packed to RecordIO, a ``.rec`` or a ``.csv``.

The digits (1797 images of 8x8 pixels, shipped inside scikit-learn's wheel, so nothing is
downloaded) are packed on first use into ``digits-train.rec`` and ``digits-val.rec`` under
the user's cache directory (``$XDG_CACHE_HOME/mxkit/digits``, default ``~/.cache``), then
read back from RecordIO. Records are MXNet's ``IRHeader`` (the label) followed by either an
encoded image (PNG/JPEG, decoded with OpenCV) or raw ``uint8`` pixels of one square
grayscale image. A ``.csv`` has one sample per row, the label first (a header line is
skipped). Everything not digits is split 80/20 into training and validation samples.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mxkit.core.errors import ConfigError, FormatError

# the split is fixed, whatever --seed says, so validation accuracy compares across runs
_SPLIT_SEED = 0
_VALIDATION_FRACTION = 0.2


@dataclass
class Dataset:
    """Training and validation samples in memory, with where they came from."""

    train_data: np.ndarray
    train_label: np.ndarray
    val_data: np.ndarray
    val_label: np.ndarray
    num_classes: int
    source: str

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one sample (``(1, 8, 8)`` for the digits)."""
        return tuple(self.train_data.shape[1:])


def cache_directory() -> Path:
    """``$XDG_CACHE_HOME/mxkit`` (``~/.cache/mxkit`` when unset), as the XDG base-directory spec says."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mxkit"


def _split(count: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.RandomState(_SPLIT_SEED).permutation(count)
    held_out = max(1, round(count * _VALIDATION_FRACTION))
    return order[held_out:], order[:held_out]


def _write_records(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    from mxkit.io import IRHeader, MXRecordIO, pack

    # the writer writes a temporary and renames it over `path` at close: a run killed while
    # packing leaves no half-written .rec behind, and workers packing the same cache at once
    # each replace it whole
    with MXRecordIO(str(path), "w") as writer:
        for index, (image, label) in enumerate(zip(images, labels)):
            writer.write(pack(IRHeader(0, float(label), index, 0), image.astype(np.uint8).tobytes()))


def pack_digits(directory: Path | None = None) -> tuple[Path, Path]:
    """Pack scikit-learn's digits into ``digits-train.rec`` and ``digits-val.rec`` (once).

    Returns
    -------
    (Path, Path)
        The training and validation files.
    """
    directory = Path(directory) if directory is not None else cache_directory() / "digits"
    train_path, val_path = directory / "digits-train.rec", directory / "digits-val.rec"
    if train_path.exists() and val_path.exists():
        return train_path, val_path
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "sklearn":
            raise
        from mxkit.core.errors import MissingComponentError

        raise MissingComponentError("the default data of mxkit train, the handwritten digits inside scikit-learn, "
                                    "needs scikit-learn: pip install 'mxkit[demo]' (or give --data PATH.rec|PATH.csv)"
                                    ) from None

    directory.mkdir(parents=True, exist_ok=True)
    digits = load_digits()
    # scikit-learn's pixels are 0..16 ink counts; scale to 0..255 grey levels
    images = np.rint(digits.images * (255.0 / 16.0)).astype(np.uint8)
    train, val = _split(len(images))
    _write_records(train_path, images[train], digits.target[train])
    _write_records(val_path, images[val], digits.target[val])
    return train_path, val_path


def read_records(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Every record of a ``.rec`` file: ``(images float32 (N, C, H, W) in [0, 1], labels float32)``.

    Raises
    ------
    FormatError
        For a raw record that is not one square grayscale image, or records of mixed shapes.
    """
    from mxkit.io import MXRecordIO, unpack

    reader = MXRecordIO(str(path), "r")
    images: list[np.ndarray] = []
    labels: list[float] = []
    try:
        while (record := reader.read()) is not None:
            header, payload = unpack(record)
            images.append(_decode(payload, path, len(images)))
            label = header.label
            labels.append(float(label if np.ndim(label) == 0 else np.asarray(label).ravel()[0]))
    finally:
        reader.close()
    if not images:
        raise FormatError(f"{str(path)!r} holds no records")
    shapes = {image.shape for image in images}
    if len(shapes) > 1:
        raise FormatError(f"the records of {str(path)!r} hold images of several shapes ({sorted(shapes)}); "
                          f"pack them at one shape with mxkit im2rec --center-crop --resize N (--resize alone keeps "
                          f"each image's aspect ratio, so the shapes would still differ)")
    return np.stack(images).astype(np.float32) / 255.0, np.asarray(labels, dtype=np.float32)


def _decode(payload: bytes, path: Path | str, index: int) -> np.ndarray:
    if payload[:4] == b"\x89PNG" or payload[:2] == b"\xff\xd8":
        from mxkit.io.image import cv2_module
        from mxkit.io.image_header import check_image_pixels

        try:
            check_image_pixels(payload)
        except FormatError as exc:
            raise FormatError(f"record {index} of {str(path)!r}: {exc}") from None
        cv2 = cv2_module()
        image = cv2.imdecode(np.frombuffer(payload, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
        if image.ndim == 2:
            return np.asarray(image[None])
        return np.asarray(image[:, :, ::-1].transpose(2, 0, 1))  # OpenCV's BGR, height-width-channel -> RGB, CHW
    side = math.isqrt(len(payload))
    if side * side != len(payload) or side == 0:
        raise FormatError(f"record {index} of {str(path)!r} holds {len(payload)} raw bytes, not one square "
                          f"grayscale image (side*side bytes) nor a PNG/JPEG")
    return np.frombuffer(payload, dtype=np.uint8).reshape(1, side, side)


def finite_rows(table: np.ndarray, source: str, first_line: int, drop: bool) -> np.ndarray:
    """``table`` (float64, one sample a row) without non-finite values.

    A NaN, an infinity or a number too large for float32 (which would become one) is an
    error naming its line and column (1-based, as in the file), unless ``drop``: then the
    rows holding one are left out, and a warning counts them.

    Raises
    ------
    FormatError
        For the first non-finite value (without ``drop``), or when ``drop`` leaves nothing.
    """
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(table) | (np.abs(table) > np.finfo(np.float32).max)
    if not bad.any():
        return table
    rows = np.flatnonzero(bad.any(axis=1))
    if not drop:
        row = int(rows[0])
        column = int(np.flatnonzero(bad[row])[0])
        what = "the label" if column == 0 else f"feature {column}"
        raise FormatError(
            f"{source}: line {first_line + row}, column {column + 1} ({what}) is {float(table[row, column])!r}, not a "
            f"finite float32 number ({len(rows)} row(s) hold such values); fix the data, or pass "
            f"--drop-nonfinite to leave those rows out")
    import warnings

    kept: np.ndarray = table[~bad.any(axis=1)]
    if not len(kept):
        raise FormatError(f"{source}: every row holds a non-finite value; nothing is left to train on")
    warnings.warn(f"{source}: left out {len(rows)} row(s) holding non-finite values (first at line "
                  f"{first_line + int(rows[0])})", stacklevel=2)
    return kept


def read_csv(path: Path | str, drop_nonfinite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Samples of a CSV file (label first on each row); square feature counts become 1-channel images.

    Non-finite values (NaN, inf, or beyond float32) are an error naming the line and
    column, or with ``drop_nonfinite`` their rows are left out (see :func:`finite_rows`).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline()
    except FileNotFoundError:
        raise ConfigError(f"--data {str(path)!r}: no such file") from None
    try:
        [float(field) for field in first.split(",")]
        skip = 0
    except ValueError:
        skip = 1  # a header line
    try:
        # float64 first: a value beyond float32 must be seen, not silently become inf
        table = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise FormatError(f"{str(path)!r} is not a CSV of numbers with the label first on each row: {exc}") from None
    if table.shape[1] < 2:
        raise FormatError(f"{str(path)!r} has {table.shape[1]} column(s); each row needs a label and features")
    table = finite_rows(table, repr(str(path)), skip + 1, drop_nonfinite)
    labels, features = table[:, 0], table[:, 1:]
    if features.max(initial=0) > 1.0:
        features = features / float(features.max())  # pixel values: scale to [0, 1] (the max is finite)
    side = math.isqrt(features.shape[1])
    if side * side == features.shape[1] and side >= 4:
        features = features.reshape(-1, 1, side, side)
    return features.astype(np.float32), labels.astype(np.float32)


def _check_labels(labels: np.ndarray, source: str) -> int:
    if labels.size and (labels.min() < 0 or np.any(labels != np.round(labels))):
        raise FormatError(f"{source}: labels must be class indices 0, 1, 2, ...; found {labels.min()}")
    return int(labels.max()) + 1


def load_dataset(spec: str, drop_nonfinite: bool = False) -> Dataset:
    """``digits``, ``PATH.rec`` or ``PATH.csv`` as a :class:`Dataset`.

    Non-finite values in a CSV are an error naming the line and column, unless
    ``drop_nonfinite`` (``mxkit train --drop-nonfinite``) leaves their rows out.

    Raises
    ------
    ConfigError
        For a missing file or one that is neither ``.rec`` nor ``.csv``.
    """
    if spec == "digits":
        train_path, val_path = pack_digits()
        train_x, train_y = read_records(train_path)
        val_x, val_y = read_records(val_path)
        return Dataset(train_x, train_y, val_x, val_y, 10, f"scikit-learn digits, packed in {train_path.parent}")
    path = Path(spec)
    if path.suffix not in (".rec", ".csv"):
        raise ConfigError(f"--data must be 'digits', a .rec file or a .csv file, got {spec!r}")
    if not path.exists():
        raise ConfigError(f"--data {spec!r}: no such file")
    data, labels = read_records(path) if path.suffix == ".rec" else read_csv(path, drop_nonfinite)
    num_classes = _check_labels(labels, spec)
    if len(data) < 2:
        raise FormatError(f"{spec!r} holds {len(data)} sample(s); training needs at least 2")
    train, val = _split(len(data))
    return Dataset(data[train], labels[train], data[val], labels[val], num_classes, spec)


__all__ = ["Dataset", "cache_directory", "finite_rows", "load_dataset", "pack_digits", "read_csv", "read_records"]
