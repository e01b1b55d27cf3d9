"""Vision data helpers (``mx.gluon.data.vision``)."""

from mxkit.gluon.data.vision import transforms

__all__ = ["transforms"]
