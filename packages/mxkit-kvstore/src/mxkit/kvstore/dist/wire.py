"""How a batch of values travels in one request: small arrays packed into one buffer per dtype.

Ray serialises each array of a request separately (a few microseconds and a buffer each),
so a 100-key step would spend more on framing than on data. :func:`pack` concatenates the
small arrays of a batch into one flat buffer per dtype and leaves large ones (and object-
store references, compressed payloads) as they are; :func:`unpack` gives back the list,
small values as views of the buffers (no copy).

The data channel (:mod:`.channel`) does the same for its frames: :func:`flatten` gives a
request's or an answer's payloads as a *layout* (one int per value) and the frame's arrays,
small plain arrays packed into one buffer per dtype, and :func:`unflatten` takes them
apart again. A packed value carries no shape and no size of its own: the receiver knows
both (a server from the key part it stores, a worker from the key it pulls), so a frame of
a hundred small keys has two or three arrays to describe and check, not a hundred. Every
count is checked: the packed buffers must hold exactly what the values need.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np
from mxkit.kvstore.dist.frames import ChannelError

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


#: a channel layout entry: the value is the next array of the frame
SINGLE = -1
#: a channel layout entry ``PACKED - g``: the value is the next part of packed buffer ``g``
PACKED = -2
#: arrays up to this many bytes travel packed on the data channel (copying them costs less
#: than framing, describing and checking each one)
CHANNEL_PACK_MAX_BYTES = 64 * 1024


def flatten(payloads: list[Any], pack_small: bool = True) -> tuple[list[int], int, list[np.ndarray]]:
    """``(layout, groups, arrays)`` of ``payloads`` for a data-channel frame.

    ``layout`` has one int per payload: :data:`SINGLE` (the next separate array), ``n >= 1``
    (a tuple of the next ``n`` separate arrays: a compressed payload) or ``PACKED - g`` (the
    next ``size`` elements of packed buffer ``g``, ``size`` being what the receiver expects
    of that value). ``arrays`` are the ``groups`` packed buffers (1-D, one per dtype), then
    the separate arrays in order. Large arrays are never copied.
    """
    layout: list[int] = []
    group_of: dict[Any, int] = {}  # dtype -> its packed buffer's number
    members: list[list[np.ndarray]] = []
    separate: list[np.ndarray] = []
    ndarray = np.ndarray
    for payload in payloads:  # (once per value of a request that may name every key of a model)
        if type(payload) is tuple:
            layout.append(len(payload))
            separate.extend(np.asarray(item) for item in payload)
            continue
        array = payload if type(payload) is ndarray else np.asarray(payload)
        if pack_small and array.nbytes <= CHANNEL_PACK_MAX_BYTES:
            group = group_of.get(array.dtype)
            if group is None:
                group = group_of[array.dtype] = len(members)
                members.append([])
            members[group].append(array)
            layout.append(PACKED - group)
        else:
            layout.append(SINGLE)
            separate.append(array)
    # axis=None: each array flattened in C order, all joined in one copy
    packed = [np.concatenate(arrays, axis=None) if len(arrays) > 1 else arrays[0].reshape(-1) for arrays in members]
    return layout, len(packed), packed + separate


def unflatten(layout: Any, groups: Any, arrays: list[np.ndarray],
              shape_of: Callable[[int], tuple[int, ...]]) -> list[Any]:
    """The payloads :func:`flatten` laid out; ``shape_of(i)`` is the shape value ``i`` must
    have when it is packed (asked only for packed values). Packed values are views of the
    packed buffers, reshaped.

    Raises
    ------
    ChannelError
        If the layout is malformed or the arrays do not hold exactly what it describes.
    """
    if type(layout) is not list:
        raise ChannelError(f"malformed frame: 'values' must be a list of ints, got {layout!r:.100}")
    if type(groups) is not int or not 0 <= groups <= len(arrays):
        raise ChannelError(f"malformed frame: 'packed' must be an int from 0 to the frame's {len(arrays)} arrays, "
                           f"got {groups!r:.50}")
    packed, separate = arrays[:groups], arrays[groups:]
    for buffer in packed:
        if buffer.ndim != 1:
            raise ChannelError(f"malformed frame: a packed buffer is 1-D, got shape {buffer.shape}")
    lowest = PACKED - groups + 1
    needed = 0
    for count in layout:
        if type(count) is not int or count < lowest or count == 0:
            raise ChannelError(f"malformed frame: an entry of 'values' is {SINGLE}, a count >= 1 or a packed "
                               f"buffer's {PACKED}..{lowest}, got {count!r:.50}")
        if count > 0:
            needed += count
        elif count == SINGLE:
            needed += 1
    if needed != len(separate):
        raise ChannelError(f"malformed frame: 'values' describes {needed} separate arrays, the frame has "
                           f"{len(separate)}")
    payloads: list[Any] = []
    offsets = [0] * groups
    index = 0
    for position, count in enumerate(layout):
        if count == SINGLE:
            payloads.append(separate[index])
            index += 1
        elif count > 0:
            payloads.append(tuple(separate[index:index + count]))
            index += count
        else:
            group = PACKED - count
            shape = shape_of(position)
            start = offsets[group]
            stop = start + prod(shape)
            if stop > packed[group].size:
                raise ChannelError(f"malformed frame: packed buffer {group} has {packed[group].size} elements, "
                                   f"fewer than its values need")
            payloads.append(packed[group][start:stop].reshape(shape))
            offsets[group] = stop
    for group, (offset, buffer) in enumerate(zip(offsets, packed, strict=True)):
        if offset != buffer.size:
            raise ChannelError(f"malformed frame: packed buffer {group} has {buffer.size} elements, its values "
                               f"need {offset}")
    return payloads


__all__ = ["CHANNEL_PACK_MAX_BYTES", "PACKED", "PACK_MAX_BYTES", "Packed", "SINGLE", "flatten", "pack", "unflatten",
           "unpack"]
