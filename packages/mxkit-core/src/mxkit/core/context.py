"""Devices: ``Context``, ``cpu()``, ``gpu()`` and the default-context stack.

A Context is only a (device type, device id) pair; it is cheap to make and hashable.
Its backend is resolved through the plugin registry when first used, so that
``mx.gpu()`` can be written anywhere but fails, on use, with a message that says which
package to install.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, ClassVar

from mxkit.core.errors import DeviceError, PluginError

# device types whose spelling differs from the canonical one
_DEVICE_ALIASES = {"cuda": "gpu"}
_backend_cache: dict[tuple[str, int], Any] = {}
_backend_lock = threading.Lock()


class _ContextType(type):
    """Gives ``Context`` MXNet's deprecated class attribute ``Context.default_ctx``."""

    @property
    def default_ctx(cls) -> Context:
        """This thread's current device (MXNet 1.x's deprecated spelling of :func:`current_context`)."""
        warnings.warn("Context.default_ctx is deprecated (as in MXNet); use mx.context.current_context()",
                      DeprecationWarning, stacklevel=2)
        return current_context()

    @default_ctx.setter
    def default_ctx(cls, ctx: Context) -> None:
        warnings.warn("Context.default_ctx is deprecated (as in MXNet); use mx.test_utils.set_default_context",
                      DeprecationWarning, stacklevel=2)
        set_thread_default(ctx)


class Context(metaclass=_ContextType):
    """A device: ``Context("cpu", 0)``, ``Context("gpu", 1)``, ``Context("opencl", 0)``.

    Used as a context manager it becomes the default device of the enclosed block
    (per thread), as in MXNet: ``with mx.gpu(0): a = mx.nd.ones((2, 3))``.
    """

    #: MXNet's numeric device types (used in its binary NDArray files)
    devtype2id: ClassVar[dict[str, int]] = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}
    devid2type: ClassVar[dict[int, str]] = {v: k for k, v in devtype2id.items()}

    __slots__ = ("device_id", "device_type")

    def __init__(self, device_type: str | Context, device_id: int = 0):
        if isinstance(device_type, Context):
            self.device_type: str = device_type.device_type
            self.device_id: int = device_type.device_id
        else:
            if not isinstance(device_type, str) or not device_type.strip():
                raise DeviceError(f"a device type must be a non-empty string like 'cpu', got {device_type!r}")
            kind = device_type.strip().lower()
            self.device_type = _DEVICE_ALIASES.get(kind, kind)
            if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
                raise DeviceError(f"a device id must be a non-negative int, got {device_id!r}")
            self.device_id = device_id

    @property
    def device_typeid(self) -> int:
        """MXNet's numeric device type (cpu 1, gpu 2, cpu_pinned 3, cpu_shared 5)."""
        try:
            return self.devtype2id[self.device_type]
        except KeyError:
            raise DeviceError(f"device type {self.device_type!r} has no MXNet numeric id") from None

    @property
    def backend(self) -> Any:
        """The backend object serving this device (created once per device)."""
        key = (self.device_type, self.device_id)
        backend = _backend_cache.get(key)
        if backend is not None:
            return backend
        from mxkit.core.plugins import get_backend

        try:
            spec = get_backend(self.device_type)
        except PluginError as exc:
            raise DeviceError(f"cannot use device {self}: {exc}") from None
        with _backend_lock:
            backend = _backend_cache.get(key)
            if backend is None:
                assert spec.factory is not None
                backend = spec.factory(self.device_id)
                _backend_cache[key] = backend
        return backend

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self) -> Context:
        stack = _stack()
        stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack().pop()


_local = threading.local()
_PROCESS_DEFAULT = Context("cpu", 0)


def _stack() -> list[Context]:
    stack: list[Context] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current_context() -> Context:
    """The innermost ``with ctx:`` of this thread, else its :func:`set_thread_default`, else ``cpu(0)``."""
    stack = _stack()
    return stack[-1] if stack else getattr(_local, "default", _PROCESS_DEFAULT)


def set_thread_default(ctx: Context | None) -> Context | None:
    """Make ``ctx`` this thread's device outside any ``with ctx:`` (None: back to ``cpu(0)``).

    MXNet's ``Context._default_ctx.value = ctx`` (``mx.test_utils.set_default_context``).
    Returns the previous thread default, or None if there was none.
    """
    previous: Context | None = getattr(_local, "default", None)
    if ctx is None:
        _local.__dict__.pop("default", None)
    elif not isinstance(ctx, Context):
        raise DeviceError(f"the default context must be a Context such as mx.cpu(0), got {ctx!r}")
    else:
        _local.default = ctx
    return previous


def cpu(device_id: int = 0) -> Context:
    """The CPU device ``device_id`` (distinct ids are distinct devices, for testing data parallelism)."""
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """The GPU ``device_id`` (needs the mxkit-cuda plugin when used)."""
    return Context("gpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """Page-locked host memory, for fast copies to GPUs."""
    return Context("cpu_pinned", device_id)


def cpu_shared(device_id: int = 0) -> Context:
    """Host memory that MXNet shared between processes (data loader workers); CPU memory here."""
    return Context("cpu_shared", device_id)


def num_gpus() -> int:
    """How many GPUs the installed gpu backend sees (0 without one, or without a driver)."""
    from mxkit.core.plugins import get_backend

    try:
        spec = get_backend("gpu")
    except PluginError:
        return 0
    return int(spec.count_devices()) if spec.count_devices is not None else 0


def gpu_memory_info(device_id: int = 0) -> tuple[int, int]:
    """``(free, total)`` bytes of GPU ``device_id``, as MXNet's ``mx.context.gpu_memory_info``.

    Raises
    ------
    DeviceError
        Without a gpu backend, or when that backend cannot report memory or lacks the device.
    """
    from mxkit.core.plugins import get_backend

    try:
        spec = get_backend("gpu")
    except PluginError as exc:
        raise DeviceError(f"cannot read the memory of gpu({device_id}): {exc}") from None
    if spec.memory_info is None:
        raise DeviceError(f"the gpu backend {spec.name!r} does not report device memory")
    return spec.memory_info(device_id)


def clear_backend_cache() -> None:
    """Forget instantiated backends (tests that swap plugins)."""
    with _backend_lock:
        _backend_cache.clear()


__all__ = ["Context", "clear_backend_cache", "cpu", "cpu_pinned", "cpu_shared", "current_context", "gpu",
           "gpu_memory_info", "num_gpus", "set_thread_default"]
