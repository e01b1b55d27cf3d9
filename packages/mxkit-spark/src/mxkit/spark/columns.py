"""Feature and label columns: what the driver checks, and how executors turn rows into arrays.

A feature column is one of

- a Spark ML vector (``pyspark.ml.linalg.VectorUDT``, dense or sparse),
- an array of numbers (``ArrayType`` of a numeric type),
- image bytes (``BinaryType``: PNG or JPEG, decoded on the executors with OpenCV);

a label column is a number. The driver checks names and types against the schema before
any task starts (:func:`check_columns`), so a typo fails at once with the columns there
are; what only the rows can tell (a vector of the wrong size, an image of another shape)
is checked on the executors, row by row, by :class:`RowDecoder`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError, DTypeError, ShapeError

VECTOR, ARRAY, IMAGE = "vector", "array", "image"


@dataclass(frozen=True)
class FeatureColumn:
    """A checked feature column: its name, kind (``vector``, ``array``, ``image``), the
    shape of one sample (``(size,)`` for vectors and arrays, ``(channels, height, width)``
    for images) and the factor every value is multiplied by (``1/255`` maps image bytes to
    [0, 1])."""

    name: str
    kind: str
    sample_shape: tuple[int, ...]
    scale: float = 1.0


def _numeric(data_type: Any) -> bool:
    from pyspark.sql.types import NumericType

    return isinstance(data_type, NumericType)


def _field(schema: Any, name: Any, role: str) -> Any:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"the {role} column must be a column name (a non-empty str), got {name!r}")
    names = schema.fieldNames()
    if name not in names:
        raise ConfigError(f"the DataFrame has no {role} column {name!r}; its columns are {names}")
    return schema[name]


def feature_kind(schema: Any, name: str) -> str:
    """The kind of feature column ``name`` in ``schema``.

    Raises
    ------
    ConfigError
        If there is no such column.
    DTypeError
        If its type is not a vector, an array of numbers or binary (image bytes).
    """
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import ArrayType, BinaryType

    data_type = _field(schema, name, "features").dataType
    if isinstance(data_type, VectorUDT):
        return VECTOR
    if isinstance(data_type, ArrayType) and _numeric(data_type.elementType):
        return ARRAY
    if isinstance(data_type, BinaryType):
        return IMAGE
    raise DTypeError(f"the features column {name!r} has type {data_type.simpleString()}; it must be a vector "
                     f"(pyspark.ml.linalg), an array of numbers, or binary (PNG/JPEG image bytes)")


def check_label(schema: Any, name: str) -> None:
    """Check that ``name`` is a numeric column of ``schema``.

    Raises
    ------
    ConfigError
        If there is no such column.
    DTypeError
        If it is not numeric.
    """
    data_type = _field(schema, name, "label").dataType
    if not _numeric(data_type):
        raise DTypeError(f"the label column {name!r} has type {data_type.simpleString()}; it must be a number "
                         f"(the class index for a softmax output)")


def sample_of(kind: str, value: Any, column: str) -> np.ndarray:
    """One row's feature value as a float32 array (an image as ``(channels, height, width)``).

    Raises
    ------
    ShapeError
        If the value is missing (null).
    FormatError
        If image bytes do not decode.
    """
    if value is None:
        raise ShapeError(f"the features column {column!r} has a null value; drop or fill the row first "
                         f"(df.na.drop(subset=[{column!r}]))")
    if kind == VECTOR:
        return np.asarray(value.toArray(), dtype=np.float32)
    if kind == ARRAY:
        return np.asarray(value, dtype=np.float32)
    from mxkit.io.image import imdecode

    image = imdecode(bytes(value), iscolor=-1)
    if image.ndim == 2:
        image = image[:, :, None]
    return np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)


def check_feature_shape(kind: str, shape: Any, column: str) -> tuple[int, ...]:
    """``shape`` (of one sample) as a tuple of positive ints fitting ``kind``.

    Raises
    ------
    ShapeError
        If it is not a tuple of positive ints, or has the wrong length for the kind.
    """
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        dims = ()
    if not dims or any(d < 1 for d in dims) or (kind == IMAGE and len(dims) != 3):
        need = "(channels, height, width)" if kind == IMAGE else "a tuple of positive ints, e.g. (64,)"
        raise ShapeError(f"feature_shape of the {kind} column {column!r} must be {need}, got {shape!r}")
    return dims


class RowDecoder:
    """Turns Spark rows into (sample, label) arrays on an executor, checking every row.

    Parameters
    ----------
    features : FeatureColumn
    label : str or None
        The label column (None when predicting).
    """

    def __init__(self, features: FeatureColumn, label: str | None):
        self.features = features
        self.label = label
        self.sample_size = int(np.prod(features.sample_shape))

    def sample(self, value: Any) -> np.ndarray:
        """One feature value as a flat float32 array of ``sample_size`` elements.

        Raises
        ------
        ShapeError
            If its size or shape differs from the column's (the row's and the expected shape named).
        """
        column = self.features
        array = sample_of(column.kind, value, column.name)
        if column.kind == IMAGE:
            if array.shape != column.sample_shape:
                raise ShapeError(f"an image in column {column.name!r} decodes to (channels, height, width) "
                                 f"{array.shape}; every image must be {column.sample_shape} (resize them first, "
                                 f"or set feature_shape)")
        elif array.size != self.sample_size:
            raise ShapeError(f"a row of the {column.kind} column {column.name!r} has {array.size} values; every "
                             f"row must have {self.sample_size} (the feature_shape {column.sample_shape})")
        flat = array.reshape(-1)
        return flat * np.float32(column.scale) if column.scale != 1.0 else flat

    def label_of(self, value: Any) -> float:
        """One row's label as a float.

        Raises
        ------
        ShapeError
            If it is null.
        """
        if value is None:
            raise ShapeError(f"the label column {self.label!r} has a null value; drop or fill the row first")
        return float(value)


__all__ = ["ARRAY", "IMAGE", "VECTOR", "FeatureColumn", "RowDecoder", "check_feature_shape", "check_label",
           "feature_kind", "sample_of"]
