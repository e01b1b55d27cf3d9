"""What this machine offers for CUDA, asked without failing when nothing is there."""

from __future__ import annotations

from mxkit.core.errors import DeviceError


def cuda_unavailable_reason() -> str | None:
    """Why CUDA cannot be used here, or None when at least one GPU is usable."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'mxkit-cuda[cuda12]' or 'mxkit-cuda[cuda13]')"
    except Exception as exc:  # a broken CUDA install raises all sorts at import
        return f"CuPy failed to import: {type(exc).__name__}: {exc}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no usable CUDA driver or device: {exc}"
    if count == 0:
        return "no CUDA device is visible (check CUDA_VISIBLE_DEVICES and the driver)"
    return None


def num_gpus() -> int:
    """Number of visible CUDA devices (0 without CuPy, a driver or a device)."""
    if cuda_unavailable_reason() is not None:
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def require_gpu(device_id: int) -> None:
    """Raise :class:`DeviceError` saying what is missing unless ``gpu(device_id)`` exists."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise DeviceError(f"cannot use gpu({device_id}): {reason}")
    count = num_gpus()
    if device_id >= count:
        raise DeviceError(f"cannot use gpu({device_id}): this machine has {count} GPU(s), ids 0..{count - 1}")
