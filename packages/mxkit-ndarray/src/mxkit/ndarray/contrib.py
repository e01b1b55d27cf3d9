"""``mx.nd.contrib``: the ``_contrib_*`` operators under their short names (``mx.nd.contrib.BilinearResize2D``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.ndarray.control_flow import foreach
from mxkit.ndarray.op_functions import make_function
from mxkit.ndarray.registry import get_registry


def _generate() -> list[str]:
    registry = get_registry()
    names = []
    for name in registry.names(include_aliases=True):  # aliases too: CTCLoss is also _contrib_CTCLoss
        if name.startswith("_contrib_"):
            short = name[len("_contrib_"):]
            globals()[short] = make_function(name, registry.get(name))
            names.append(short)
    return names


def isinf(data: Any) -> Any:
    """1 where ``data`` is +inf or -inf, else 0 (in ``data``'s dtype, as MXNet's)."""
    return data.abs() == np.inf


def isnan(data: Any) -> Any:
    """1 where ``data`` is NaN, else 0 (NaN is the only value unequal to itself)."""
    return data != data


def isfinite(data: Any) -> Any:
    """1 where ``data`` is neither infinite nor NaN, else 0."""
    return (data == data) * (data.abs() != np.inf)


__all__ = [*_generate(), "foreach", "isfinite", "isinf", "isnan"]
