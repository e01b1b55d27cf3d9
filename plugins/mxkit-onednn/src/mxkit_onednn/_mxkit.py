"""Every name this plugin takes from mxkit's packages besides the hook, the registry it is handed and
the operator definitions (``OpDef.kernels``, ``OpDef.kernel``), in one place: mxkit-ndarray's
published kernel surface, :mod:`mxkit.ndarray.kernels`.
"""

from __future__ import annotations

from mxkit.ndarray.kernels import deconv_geometry, normalize_axis, release_scratch, spatial_tuple, wanted

__all__ = ["deconv_geometry", "normalize_axis", "release_scratch", "spatial_tuple", "wanted"]
