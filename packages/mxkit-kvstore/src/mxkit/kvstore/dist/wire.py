"""How a batch of values travels in one request: small arrays packed into one buffer per dtype.

Ray serialises each array of a request separately (a few microseconds and a buffer each),
so a 100-key step would spend more on framing than on data. :func:`pack` concatenates the
small arrays of a batch into one flat buffer per dtype and leaves large ones (and object-
store references, compressed payloads) as they are; :func:`unpack` gives back the list,
small values as views of the buffers (no copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: arrays up to this many bytes are packed together
PACK_MAX_BYTES = 256 * 1024

#: ``(descriptors, separate values, packed buffers by dtype)``
Packed = tuple[list[tuple[Any, ...]], list[Any], dict[str, np.ndarray]]


def pack(values: list[Any]) -> Packed:
    """Pack ``values`` (numpy arrays, or anything else, which travels as it is)."""
    descriptors: list[tuple[Any, ...]] = []
    separate: list[Any] = []
    groups: dict[str, list[np.ndarray]] = {}
    offsets: dict[str, int] = {}
    for value in values:
        if isinstance(value, np.ndarray) and value.nbytes <= PACK_MAX_BYTES:
            dtype = value.dtype.str
            offset = offsets.get(dtype, 0)
            descriptors.append(("p", dtype, offset, value.size, value.shape))
            groups.setdefault(dtype, []).append(value.reshape(-1))
            offsets[dtype] = offset + value.size
        else:
            descriptors.append(("s", len(separate)))
            separate.append(value)
    buffers = {dtype: np.concatenate(arrays) if len(arrays) > 1 else arrays[0] for dtype, arrays in groups.items()}
    return descriptors, separate, buffers


def unpack(packed: Packed) -> list[Any]:
    """The values :func:`pack` packed, in order (small ones as views of the buffers)."""
    descriptors, separate, buffers = packed
    values = []
    for descriptor in descriptors:
        if descriptor[0] == "p":
            _, dtype, offset, size, shape = descriptor
            values.append(buffers[dtype][offset:offset + size].reshape(shape))
        else:
            values.append(separate[descriptor[1]])
    return values


__all__ = ["PACK_MAX_BYTES", "Packed", "pack", "unpack"]
