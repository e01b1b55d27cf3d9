"""Every name this plugin takes from mxkit's packages besides the hook, the registry it is handed and
the operator definitions (``OpDef.kernels``, ``OpDef.kernel``), in one place.

They are helpers of mxkit-ndarray's operator modules (parameter normalisation, which outputs
the executor wants); when mxkit publishes them as its kernel interface only this module changes.
"""

from __future__ import annotations

from mxkit.ndarray.ops.nn_common import spatial_tuple, wanted
from mxkit.ndarray.shapes import normalize_axis

__all__ = ["normalize_axis", "spatial_tuple", "wanted"]
