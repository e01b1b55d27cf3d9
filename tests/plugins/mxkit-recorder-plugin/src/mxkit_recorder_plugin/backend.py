"""The ``recorder`` device: a backend written against the published interface alone.

Its memory is numpy arrays that only this backend hands out, so data crosses between the
host and a ``recorder`` device through :meth:`RecorderBackend.from_host` and
:meth:`RecorderBackend.to_host`, which record every transfer. Everything else (the generic
``xp`` kernels, the engine, autograd) is mxkit's.
"""

from __future__ import annotations

from typing import Any

import numpy
from mxkit.ndarray.backend import Backend

#: ("from_host" | "to_host", shape) of every transfer, for tests to inspect
TRANSFERS: list[tuple[str, tuple[int, ...]]] = []


class RecorderBackend(Backend):
    """The backend object of one ``recorder`` device."""

    name = "recorder"
    device_type = "recorder"
    xp = numpy

    def __init__(self, device_id: int) -> None:
        super().__init__(device_id)
        from mxkit_recorder_plugin.plugin import CALLS

        CALLS.append(("backend", device_id))

    def empty(self, shape: tuple[int, ...], dtype: Any) -> numpy.ndarray:
        return numpy.empty(shape, dtype)

    def from_host(self, array: numpy.ndarray) -> numpy.ndarray:
        TRANSFERS.append(("from_host", tuple(array.shape)))
        return numpy.array(array, copy=True)

    def to_host(self, array: numpy.ndarray) -> numpy.ndarray:
        TRANSFERS.append(("to_host", tuple(array.shape)))
        return numpy.array(array, copy=True)
