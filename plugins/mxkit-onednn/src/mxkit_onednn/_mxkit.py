"""Every name this plugin takes from mxkit's packages besides the hook and the registry, in one place.

They are module-level helpers of mxkit-ndarray's operator definitions; when mxkit publishes
them elsewhere only this module changes.
"""

from __future__ import annotations

from mxkit.ndarray.ops.nn_common import spatial_tuple, wanted
from mxkit.ndarray.registry import get_op
from mxkit.ndarray.shapes import normalize_axis

__all__ = ["get_op", "normalize_axis", "spatial_tuple", "wanted"]
