"""The published backend interface: what mxkit-ndarray asks of the object serving one device.

A backend plugin yields a :class:`~mxkit.core.specs.BackendSpec` whose ``factory(device_id)``
returns an instance of a :class:`Backend` subclass. mxkit-ndarray calls only the members
defined here; every one either has a default below or is **required** (listed in
:data:`REQUIRED_MEMBERS`). A subclass that leaves a required member out fails when the class
is defined (the plugin is reported as failing to load, naming the member); an object that
does not subclass :class:`Backend` but has the required members is accepted and completed
with the defaults (:func:`as_backend`), one without them is refused when its device is first
used, again naming what is missing.

Required
    ``name`` (kernels are registered per backend name), ``device_type``, ``xp`` (the array
    module the generic kernels are written against: ``numpy``, ``cupy``, or a module with
    numpy's API), ``empty(shape, dtype)``, ``from_host(array)``, ``to_host(array)``.

With defaults
    ``zeros``, ``full``, ``copy_from_host``, ``copy_to``, ``bind_to_device``, ``record``,
    ``make_rng``, ``from_dlpack``, ``synchronize``, ``memory_stats``, ``release_scratch``,
    ``launches_asynchronously``.

Code outside mxkit-ndarray that needs the backend of a device (to allocate, or to copy
between devices inside an engine operation) asks :func:`backend_of`.

Kernels run inside engine operations; a backend's methods may be called from any engine
thread, so they must be thread-safe (or guard themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.core.errors import PluginError

#: the members a backend must define itself (no default can stand in for them)
REQUIRED_MEMBERS: tuple[str, ...] = ("name", "device_type", "xp", "empty", "from_host", "to_host")
_REQUIRED_METHODS = ("empty", "from_host", "to_host")
_REQUIRED_ATTRIBUTES = ("name", "device_type", "xp")


class Backend:
    """Base class of the object that serves one device to mxkit-ndarray.

    Subclass it, set the class attributes and implement the three required methods; the
    other methods have working defaults that a backend overrides where its device can do
    better (a GPU's copy stream, its own random generator).

    Parameters
    ----------
    device_id : int
        The device ordinal (``mx.Context(device_type, device_id)``).

    Attributes
    ----------
    name : str
        The backend's name; kernels are registered for it (``registry.register_kernel(op,
        backend=name, ...)``) and ``mxkit info`` shows it. Required.
    device_type : str
        The Context device type it serves (``"cpu"``, ``"gpu"``, ``"fakedev"``). Required.
    xp : module
        The array module of this device (``numpy``, ``cupy``); the generic kernels call
        ``xp.add``, ``xp.matmul``... on the backend's arrays. Required (a class attribute,
        or an instance attribute set in ``__init__``).
    device_id : int
        Set by the default ``__init__``.

    Examples
    --------
    >>> import numpy
    >>> from mxkit.ndarray.backend import Backend
    >>> class HostBackend(Backend):
    ...     name, device_type, xp = "host", "host", numpy
    ...     def empty(self, shape, dtype):
    ...         return numpy.empty(shape, dtype)
    ...     def from_host(self, array):
    ...         return numpy.array(array, copy=True)
    ...     def to_host(self, array):
    ...         return array
    >>> HostBackend(0).zeros((2,), "float32")
    array([0., 0.], dtype=float32)
    """

    name: str
    device_type: str
    xp: Any

    #: True when a kernel returns as soon as its work is queued on the device (a GPU stream):
    #: an operation then costs the thread that runs it its launch, whatever its size, so an
    #: engine may run one that can start at once on the thread that pushes it. Handing it to a
    #: worker instead leaves the device idle until that worker gets the GIL, which a Python
    #: thread still pushing holds (for up to the interpreter's 5 ms switch interval). False:
    #: kernels compute before they return (the CPU), and only small ones run on the pusher.
    launches_asynchronously: bool = False

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [member for member in _REQUIRED_METHODS if getattr(cls, member) is getattr(Backend, member)]
        if missing:
            raise PluginError(
                f"backend class {cls.__module__}.{cls.__qualname__} does not implement the required "
                f"{_members(missing)} of mxkit.ndarray.backend.Backend; a backend defines "
                f"{', '.join(REQUIRED_MEMBERS)} (see docs/plugins.md, 'Writing a backend')")

    # ---- required -----------------------------------------------------------------------

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised array of ``shape`` and numpy ``dtype`` on this device. Required."""
        raise NotImplementedError

    def from_host(self, array: np.ndarray) -> Any:
        """A new device array holding a copy of the numpy ``array``. Required.

        The caller may reuse ``array`` as soon as this returns.
        """
        raise NotImplementedError

    def to_host(self, array: Any) -> np.ndarray:
        """The numpy contents of a device array, once every write launched before is done. Required.

        May return ``array`` itself when the device array *is* host memory (the CPU).
        """
        raise NotImplementedError

    # ---- allocation ---------------------------------------------------------------------

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A zero-filled array (default: :meth:`empty`, then a fill)."""
        return self.full(shape, 0, dtype)

    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> Any:
        """An array filled with ``value`` (default: :meth:`empty`, then ``array[...] = value``)."""
        out = self.empty(shape, dtype)
        out[...] = value
        return out

    # ---- copies -------------------------------------------------------------------------

    def copy_from_host(self, target: Any, host: np.ndarray) -> None:
        """Write numpy ``host`` (broadcastable to ``target``) into the existing device array ``target``.

        Runs on the engine's copy workers of this device. Default: a device copy made with
        :meth:`from_host`, assigned into ``target``.
        """
        target[...] = self.from_host(np.ascontiguousarray(np.broadcast_to(host, target.shape),
                                                          dtype=target.dtype))

    def copy_to(self, source: Any, target: Any, target_backend: Backend) -> None:
        """Copy ``source`` (an array of this device) into ``target`` (an array of ``target_backend``'s
        device, of the same shape); ``source`` may be broadcast.

        Default: through host memory (:meth:`to_host`, then ``target_backend.copy_from_host``).
        A backend that can copy directly to some devices overrides it.
        """
        target_backend.copy_from_host(target, np.broadcast_to(self.to_host(source), target.shape))

    # ---- running on the device ----------------------------------------------------------

    def bind_to_device(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` wrapped to run with this device current on whatever engine thread runs it.

        Default: ``fn`` itself (a device with no notion of a current device).
        """
        return fn

    def synchronize(self) -> None:
        """Wait for everything launched on this device (default: nothing to wait for)."""

    def record(self, run: Callable[[], None]) -> Callable[[], None] | None:
        """A recording of the device work that ``run`` launches, to be replayed many times, or None.

        A device that can record a sequence of kernels and launch it again as one unit (CUDA
        graphs) calls ``run`` in recording mode: its kernels are recorded, **not executed**, and
        the returned ``replay()`` launches them, in order, after whatever was launched on the
        device before it. A replay reads and writes the very buffers ``run`` used, so the caller
        keeps those buffers (and their contents' meaning) fixed between replays; scalars that
        ``run`` passed to its kernels are frozen into the recording.

        None means that nothing was recorded and nothing ran: the device cannot record (the
        default), or ``run`` did something a recording cannot hold (a wait for the device, a
        copy to the host). The caller then runs ``run`` itself.
        """
        return None

    # ---- random numbers -----------------------------------------------------------------

    def make_rng(self, seed: Any) -> Any:
        """The device's random generator from an int, a sequence of ints, or ``None`` (from the OS).

        It must offer numpy's ``Generator`` methods that the sampling kernels use (``random``,
        ``uniform``, ``normal``, ``integers``, ``permutation``, ...) and return arrays of
        this device. Default: a numpy ``Generator``, right when ``xp`` is numpy; a backend
        whose arrays are not numpy arrays overrides it.
        """
        return np.random.default_rng(seed)

    # ---- interchange --------------------------------------------------------------------

    def from_dlpack(self, source: Any) -> Any:
        """A device array sharing the memory of a DLPack producer (default: ``xp.from_dlpack``)."""
        return self.xp.from_dlpack(source)

    # ---- memory -------------------------------------------------------------------------

    def memory_stats(self) -> dict[str, int]:
        """Bytes of this device's allocator (keys such as ``in_use``, ``pooled``, ``peak``);
        default: ``{}`` (the backend keeps no statistics). A backend whose kernels keep temporary
        buffers between calls reports them as ``scratch``: they are part of what the device holds."""
        return {}

    def release_scratch(self) -> int:
        """Drop the temporary buffers this backend's kernels keep between calls and are not using now
        (a kernel plugin that has replaced those kernels calls it); the bytes released. Default: none
        kept, 0."""
        return 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.device_type}({getattr(self, 'device_id', '?')}))"


def _members(names: list[str]) -> str:
    quoted = ", ".join(repr(name) for name in names)
    return f"member{'s' if len(names) > 1 else ''} {quoted}"


class _CompletedBackend(Backend):
    """A :class:`Backend` standing for an object that has the required members without
    subclassing; its own members are copied onto the instance (no call through a wrapper)."""

    # placeholders: the instance's attributes (copied from the wrapped object) shadow them
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        raise NotImplementedError

    def from_host(self, array: np.ndarray) -> Any:
        raise NotImplementedError

    def to_host(self, array: Any) -> np.ndarray:
        raise NotImplementedError

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.device_id = getattr(wrapped, "device_id", 0)
        for member in _REQUIRED_ATTRIBUTES + _REQUIRED_METHODS:
            setattr(self, member, getattr(wrapped, member))
        self.launches_asynchronously = bool(getattr(wrapped, "launches_asynchronously", False))
        for member in ("zeros", "full", "copy_from_host", "copy_to", "bind_to_device", "synchronize",
                       "make_rng", "from_dlpack", "memory_stats", "release_scratch"):
            own = getattr(wrapped, member, None)
            if own is not None:
                setattr(self, member, own)

    def __repr__(self) -> str:
        return repr(self.wrapped)


def missing_members(obj: Any) -> list[str]:
    """The required members that ``obj`` lacks (empty for a complete backend)."""
    missing = [member for member in _REQUIRED_ATTRIBUTES if getattr(obj, member, None) is None]
    missing += [member for member in _REQUIRED_METHODS if not callable(getattr(obj, member, None))]
    return missing


_backends: dict[Any, Backend] = {}


def backend_of(ctx: Any) -> Backend:
    """The :class:`Backend` serving ``ctx`` (a :class:`~mxkit.core.Context`), made on first use and cached.

    Raises
    ------
    DeviceError
        When no installed plugin serves the device type (the message lists those that do).
    PluginError
        When the plugin's backend object lacks a required member (the message names it).
    """
    backend = _backends.get(ctx)
    if backend is None:
        backend = _backends[ctx] = as_backend(ctx.backend, ctx.device_type)
    return backend


def release_scratch(backend_name: str) -> int:
    """Ask every device made so far whose backend is named ``backend_name`` to drop the scratch
    buffers its kernels keep between calls and are not using now (:meth:`Backend.release_scratch`);
    the bytes released. A kernel plugin calls it when its kernels have taken over from that
    backend's (after timing them against each other), so that the losers' buffers do not stay."""
    released, seen = 0, set()
    for backend in list(_backends.values()):
        if backend.name == backend_name and id(backend) not in seen:
            seen.add(id(backend))
            released += int(backend.release_scratch() or 0)
    return released


def as_backend(obj: Any, device_type: str = "") -> Backend:
    """``obj`` checked as the backend of ``device_type``: a :class:`Backend` as it is, another
    object with the required members completed with the defaults.

    Raises
    ------
    PluginError
        When a required member is missing (the message names each one).
    """
    missing = missing_members(obj)
    if missing:
        raise PluginError(
            f"the backend of device type {device_type!r} ({type(obj).__module__}.{type(obj).__qualname__}) "
            f"lacks the required {_members(missing)}; a backend subclasses mxkit.ndarray.backend.Backend "
            f"and defines {', '.join(REQUIRED_MEMBERS)} (see docs/plugins.md, 'Writing a backend')")
    if isinstance(obj, Backend):
        return obj
    return _CompletedBackend(obj)


__all__ = ["REQUIRED_MEMBERS", "Backend", "as_backend", "backend_of", "missing_members", "release_scratch"]
