"""Gradient compressors: ``none``, ``2bit`` (MXNet's), ``fp16`` and ``topk`` with error feedback.

A compressor turns one device's gradient into a smaller payload before it is merged,
keeping what it dropped in a residual (one per key and device) that is added to the next
gradient of that key on that device, so nothing is lost for good, only delayed.

The protocol a compressor plugin implements (``CompressorSpec(factory=...)``, where
``factory(**params)`` receives the parameters of ``kv.set_gradient_compression`` except
``type``):

``type`` : str
    The name it was registered under.
``params`` : dict
    Its parameters, as they would be passed back to the factory.
``needs_residual`` : bool
    Whether :meth:`compress` takes a residual (error feedback).
``compress(xp, grad, residual) -> payload``
    ``grad`` and ``residual`` are flat arrays of one device's array module ``xp``;
    updates ``residual`` in place and returns a tuple of arrays.
``decompress(xp, payload, out, accumulate)``
    Writes (``accumulate=False``) or adds (``True``) the decoded gradient into the flat
    array ``out``; ``payload`` has been moved to ``out``'s device.

Every function is written against ``xp`` (numpy or CuPy) so a compressor runs where the
gradient lives.
"""

from __future__ import annotations

import math
from typing import Any

from mxkit.core.errors import KVStoreError

#: MXNet's bit patterns, per position inside a byte (the first of four values in the top bits)
_POS_BITS = (0xC0, 0x30, 0x0C, 0x03)
_NEG_BITS = (0x80, 0x20, 0x08, 0x02)
VALUES_PER_WORD = 16
FLOAT16_MAX = 65504.0  # the largest finite float16


def _check_params(kind: str, params: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise KVStoreError(f"gradient compression {kind!r} got unknown parameters {unknown}; "
                           f"it takes {list(allowed) or 'none'}")


def _positive_float(kind: str, name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number > 0 or math.isinf(number):
        raise KVStoreError(f"gradient compression {kind!r}: {name} must be a positive finite number, "
                           f"got {value!r}")
    return number


def pack_2bit(xp: Any, codes: Any) -> Any:
    """Pack 2-bit codes (uint8 values 0..3, flat) 16 per 32-bit word, in MXNet's layout.

    Value ``j`` of a word sits in byte ``j // 4`` of the word's memory, in the bits
    ``0xC0 >> 2 * (j % 4)``; the word is read in host byte order, like MXNet's float.
    """
    count = codes.shape[0]
    words = -(-count // VALUES_PER_WORD)
    padded = xp.zeros(words * VALUES_PER_WORD, dtype=xp.uint8)
    padded[:count] = codes
    quads = padded.reshape(-1, 4)
    packed_bytes = (quads[:, 0] << 6) | (quads[:, 1] << 4) | (quads[:, 2] << 2) | quads[:, 3]
    return packed_bytes.astype(xp.uint8).view(xp.uint32)


def unpack_2bit(xp: Any, packed: Any, count: int) -> Any:
    """The flat uint8 codes of :func:`pack_2bit`'s words (the first ``count`` of them)."""
    packed_bytes = packed.view(xp.uint8)
    quads = xp.stack([(packed_bytes >> shift) & 3 for shift in (6, 4, 2, 0)], axis=1)
    return quads.reshape(-1)[:count]


class NoCompression:
    """The ``none`` compressor: gradients are merged as they are."""

    type = "none"
    needs_residual = False

    def __init__(self, **params: Any):
        _check_params("none", params, ())
        self.params: dict[str, Any] = {}

    def compress(self, xp: Any, grad: Any, residual: Any) -> tuple[Any, ...]:
        """The gradient itself."""
        return (grad,)

    def decompress(self, xp: Any, payload: tuple[Any, ...], out: Any, accumulate: bool) -> None:
        """Copy or add the gradient into ``out``."""
        if accumulate:
            xp.add(out, payload[0], out=out)
        else:
            xp.copyto(out, payload[0])


class TwoBitCompression:
    """MXNet's 2-bit compression with error feedback.

    Per element ``residual += grad``; ``residual >= threshold`` sends ``+threshold`` and
    subtracts it from the residual, ``residual <= -threshold`` sends ``-threshold`` and
    adds it, anything else sends 0. Codes ``11`` (+), ``10`` (-) and ``00`` (0) are packed
    16 per 32-bit word (see :func:`pack_2bit`).

    Parameters
    ----------
    threshold : float
        The quantisation step (MXNet's default 0.5).
    """

    type = "2bit"
    needs_residual = True

    def __init__(self, threshold: Any = 0.5, **params: Any):
        _check_params("2bit", params, ("threshold",))
        self.threshold = _positive_float("2bit", "threshold", threshold)
        self.params = {"threshold": self.threshold}

    def compress(self, xp: Any, grad: Any, residual: Any) -> tuple[Any, ...]:
        """Quantise ``residual + grad`` to 2-bit codes; return ``(packed words,)``."""
        threshold = residual.dtype.type(self.threshold)
        xp.add(residual, grad, out=residual)
        positive = residual >= threshold
        negative = residual <= -threshold
        # subtracting 0 leaves the other residuals bit-for-bit as MXNet's kernel does
        step = xp.where(positive, threshold, xp.where(negative, -threshold, residual.dtype.type(0)))
        xp.subtract(residual, step.astype(residual.dtype, copy=False), out=residual)
        codes = positive.astype(xp.uint8) * 3 + negative.astype(xp.uint8) * 2
        return (pack_2bit(xp, codes),)

    def decompress(self, xp: Any, payload: tuple[Any, ...], out: Any, accumulate: bool) -> None:
        """Decode the codes to ``+threshold``, ``-threshold`` or 0 into ``out``."""
        codes = unpack_2bit(xp, payload[0], out.shape[0])
        threshold = out.dtype.type(self.threshold)
        values = xp.where(codes == 3, threshold, xp.where(codes == 2, -threshold, out.dtype.type(0)))
        if accumulate:
            xp.add(out, values, out=out)
        else:
            xp.copyto(out, values)


class FP16Compression:
    """Send ``residual + grad`` rounded to float16; the rounding error stays in the residual."""

    type = "fp16"
    needs_residual = True

    def __init__(self, **params: Any):
        _check_params("fp16", params, ())
        self.params: dict[str, Any] = {}

    def compress(self, xp: Any, grad: Any, residual: Any) -> tuple[Any, ...]:
        """Round to float16 (saturating at float16's largest finite value)."""
        xp.add(residual, grad, out=residual)
        half = xp.clip(residual, -FLOAT16_MAX, FLOAT16_MAX).astype(xp.float16)
        xp.subtract(residual, half.astype(residual.dtype), out=residual)
        return (half,)

    def decompress(self, xp: Any, payload: tuple[Any, ...], out: Any, accumulate: bool) -> None:
        """Widen the float16 values into ``out``."""
        if accumulate:
            xp.add(out, payload[0], out=out, casting="unsafe")
        else:
            xp.copyto(out, payload[0], casting="unsafe")


class TopKCompression:
    """Send the ``ratio`` largest-magnitude entries of ``residual + grad`` (indices and values).

    The entries sent are zeroed in the residual; the rest wait there for a later push.

    Parameters
    ----------
    ratio : float
        Fraction of the entries sent, in (0, 1]; at least one entry is sent.
    """

    type = "topk"
    needs_residual = True

    def __init__(self, ratio: Any = 0.01, **params: Any):
        _check_params("topk", params, ("ratio",))
        self.ratio = _positive_float("topk", "ratio", ratio)
        if self.ratio > 1:
            raise KVStoreError(f"gradient compression 'topk': ratio must be in (0, 1], got {ratio!r}")
        self.params = {"ratio": self.ratio}

    def count(self, size: int) -> int:
        """How many entries of a gradient of ``size`` elements are sent."""
        return max(1, min(size, math.ceil(self.ratio * size)))

    def compress(self, xp: Any, grad: Any, residual: Any) -> tuple[Any, ...]:
        """Return ``(indices, values)`` of the largest-magnitude entries."""
        xp.add(residual, grad, out=residual)
        keep = self.count(residual.shape[0])
        if keep == residual.shape[0]:
            indices = xp.arange(keep, dtype=xp.int64)
        else:
            indices = xp.argpartition(-xp.abs(residual), keep - 1)[:keep].astype(xp.int64)
        values = residual[indices].copy()
        residual[indices] = 0
        return indices, values

    def decompress(self, xp: Any, payload: tuple[Any, ...], out: Any, accumulate: bool) -> None:
        """Scatter the values into ``out`` (zeros elsewhere unless accumulating)."""
        indices, values = payload
        if not accumulate:
            out[...] = 0
        out[indices] += values.astype(out.dtype, copy=False)  # indices are unique within a payload


BUILTIN_COMPRESSORS = {
    "none": NoCompression,
    "2bit": TwoBitCompression,
    "fp16": FP16Compression,
    "topk": TopKCompression,
}


def make_compressor(compression_params: Any) -> Any:
    """The compressor described by ``{'type': name, **params}`` (``kv.set_gradient_compression``).

    Raises
    ------
    KVStoreError
        If the argument is not a dict with a ``type`` string.
    UnknownPluginError
        If no plugin provides the type; the message lists the available ones.
    """
    if not isinstance(compression_params, dict):
        raise KVStoreError(f"set_gradient_compression takes a dict like {{'type': '2bit', 'threshold': 0.5}}, "
                           f"got {compression_params!r}")
    params = dict(compression_params)
    kind = params.pop("type", None)
    if not isinstance(kind, str):
        raise KVStoreError(f"set_gradient_compression needs a 'type' string (e.g. '2bit'), got "
                           f"{compression_params!r}")
    from mxkit.core.plugins import get_compressor

    spec = get_compressor(kind)
    assert spec.factory is not None
    return spec.factory(**params)


__all__ = [
    "BUILTIN_COMPRESSORS",
    "FP16Compression",
    "NoCompression",
    "TopKCompression",
    "TwoBitCompression",
    "make_compressor",
    "pack_2bit",
    "unpack_2bit",
]
