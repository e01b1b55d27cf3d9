"""``sgd_update``, ``sgd_mom_update`` and ``adam_update`` in one pass over memory (:mod:`mxkit_cpu._update`).

These operators are defined by mxkit-train when its optimizers are imported, after the
registry has asked the plugins for kernels, so they are registered with
``when_defined=True``. The results equal the generic kernels' to the bit; arrays the loops
do not cover (mixed or non-float dtypes, non-contiguous) go to the generic kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _update
from mxkit_cpu.conv import generic_kernel

_REAL = (np.dtype(np.float32), np.dtype(np.float64))


def _flat(arrays: list) -> list | None:
    dtype = arrays[0].dtype
    if dtype not in _REAL or any(not isinstance(a, np.ndarray) or a.dtype != dtype or not a.flags.c_contiguous
                                 for a in arrays):
        return None
    return [a.reshape(-1) for a in arrays]


def _common(params: dict) -> tuple[float, float, float, float]:
    return params["lr"], params["wd"], params["rescale_grad"], params["clip_gradient"]


def sgd_update(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    flat = _flat([*inputs, *outputs])
    if flat is None:
        generic_kernel("sgd_update", xp, inputs, outputs, params)
        return
    _update.sgd(*flat, *_common(params))


def sgd_mom_update(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    flat = _flat([*inputs, *outputs])
    if flat is None:
        generic_kernel("sgd_mom_update", xp, inputs, outputs, params)
        return
    _update.sgd_mom(*flat, *_common(params), params["momentum"])


def adam_update(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    flat = _flat([*inputs, *outputs])
    if flat is None:
        generic_kernel("adam_update", xp, inputs, outputs, params)
        return
    _update.adam(*flat, *_common(params), params["beta1"], params["beta2"], params["epsilon"])


#: operator name -> kernel (operators that mxkit-train defines)
KERNELS = {"sgd_update": sgd_update, "sgd_mom_update": sgd_mom_update, "adam_update": adam_update}

__all__ = ["KERNELS"]
