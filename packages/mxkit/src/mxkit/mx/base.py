"""``mx.base``: MXNet's base names that user code imports (``MXNetError``)."""

from mxkit.core.errors import MXKitError

#: MXNet code catches ``mx.base.MXNetError``; in mxkit every error is an MXKitError.
MXNetError = MXKitError

__all__ = ["MXNetError"]
