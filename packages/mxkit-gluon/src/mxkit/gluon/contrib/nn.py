"""``gluon.contrib.nn``: MXNet 1.x's contributed layers.

``Concurrent`` / ``HybridConcurrent`` are the names ``nn.Concatenate`` / ``nn.HybridConcatenate``
had first; ``SyncBatchNorm`` is BatchNorm over one device (statistics across several devices of
one process are not provided, and asking for them raises); ``SparseEmbedding`` is an Embedding
whose gradient is row_sparse (the rows a batch looked up), updated lazily by the Trainer.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock
from mxkit.gluon.nn import BatchNorm, Concatenate, Embedding, HybridConcatenate
from mxkit.gluon.parameter import GluonError


class Concurrent(Concatenate):
    """Run every child on the input and concatenate the results along ``axis`` (default -1)."""


class HybridConcurrent(HybridConcatenate):
    """The hybridizable :class:`Concurrent`."""


class Identity(HybridBlock):
    """Returns its input unchanged (a placeholder branch in a Concurrent block)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return x


class SparseEmbedding(Embedding):
    """MXNet's ``SparseEmbedding(input_dim, output_dim, dtype, weight_initializer)``.

    Its gradient is row_sparse (the looked-up rows), so the Trainer's optimizer updates only
    those rows, as MXNet's lazy update does. MXNet also stores the weight row-sparse and reads
    it by rows through the KVStore; mxkit keeps the weight dense (``data()`` reads it).
    """

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32", weight_initializer: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(input_dim, output_dim, dtype=dtype, weight_initializer=weight_initializer,
                         sparse_grad=True, **kwargs)


class SyncBatchNorm(BatchNorm):
    """MXNet's cross-device BatchNorm, on one device: there it is exactly :class:`nn.BatchNorm`.

    Parameters
    ----------
    in_channels : int
        Channels (0: inferred on first use).
    num_devices : int, optional
        How many devices share the statistics; only 1 (the default) is provided.
    momentum, epsilon, center, scale, use_global_stats, *_initializer
        As :class:`nn.BatchNorm` (the channel axis is 1).
    """

    def __init__(self, in_channels: int = 0, num_devices: int | None = None, momentum: float = 0.9,
                 epsilon: float = 1e-5, center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 running_mean_initializer: Any = "zeros", running_variance_initializer: Any = "ones",
                 **kwargs: Any) -> None:
        if num_devices not in (None, 1):
            raise GluonError(f"SyncBatchNorm(num_devices={num_devices}): batch statistics shared across several "
                             f"devices are not provided; use num_devices=1 (one device), or nn.BatchNorm per device")
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer, running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer, in_channels=in_channels,
                         **kwargs)


def _factors(factor: Any, ndim: int, name: str) -> tuple[int, ...]:
    factors = (factor,) * ndim if not isinstance(factor, (tuple, list)) else tuple(factor)
    if len(factors) != ndim or not all(isinstance(f, int) and f >= 1 for f in factors):
        raise GluonError(f"{name}: factor must be a positive int or {ndim} positive ints, got {factor!r}")
    return factors


class PixelShuffle1D(HybridBlock):
    """``(N, f*C, W) -> (N, C, W*f)``: moves groups of ``f`` channels into the width (sub-pixel upsampling)."""

    def __init__(self, factor: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        (self._factor,) = _factors(factor, 1, "PixelShuffle1D")

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        f = self._factor
        x = F.reshape(x, (0, -4, -1, f, 0))       # (N, C, f, W)
        x = F.transpose(x, (0, 1, 3, 2))          # (N, C, W, f)
        return F.reshape(x, (0, 0, -3))           # (N, C, W*f)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._factor})"


class PixelShuffle2D(HybridBlock):
    """``(N, f1*f2*C, H, W) -> (N, C, H*f1, W*f2)``."""

    def __init__(self, factor: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factors = _factors(factor, 2, "PixelShuffle2D")

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        f1, f2 = self._factors
        x = F.reshape(x, (0, -4, -1, f1 * f2, 0, 0))     # (N, C, f1*f2, H, W)
        x = F.reshape(x, (0, 0, -4, f1, f2, 0, 0))       # (N, C, f1, f2, H, W)
        x = F.transpose(x, (0, 1, 4, 2, 5, 3))           # (N, C, H, f1, W, f2)
        return F.reshape(x, (0, 0, -3, -3))              # (N, C, H*f1, W*f2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._factors})"


class PixelShuffle3D(HybridBlock):
    """``(N, f1*f2*f3*C, D, H, W) -> (N, C, D*f1, H*f2, W*f3)``."""

    def __init__(self, factor: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factors = _factors(factor, 3, "PixelShuffle3D")

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        f1, f2, f3 = self._factors
        x = F.reshape(x, (0, -4, -1, f1 * f2 * f3, 0, 0, 0))     # (N, C, f1*f2*f3, D, H, W)
        x = F.reshape(x, (0, 0, -4, f1, f2 * f3, 0, 0, 0))       # (N, C, f1, f2*f3, D, H, W)
        x = F.reshape(x, (0, 0, 0, -4, f2, f3, 0, 0, 0))         # (N, C, f1, f2, f3, D, H, W)
        x = F.transpose(x, (0, 1, 5, 2, 6, 3, 7, 4))             # (N, C, D, f1, H, f2, W, f3)
        return F.reshape(x, (0, 0, -3, -3, -3))                  # (N, C, D*f1, H*f2, W*f3)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._factors})"


__all__ = ["Concurrent", "HybridConcurrent", "Identity", "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D",
           "SparseEmbedding", "SyncBatchNorm"]
