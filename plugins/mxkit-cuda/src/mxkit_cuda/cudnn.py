"""cuDNN 9 called with ctypes (CuPy 14 no longer wraps cuDNN): the library, a handle per device,
tensor descriptors, one workspace per device shared by every call, and the convolution's three
directions (:mod:`mxkit_cuda.convolution` serves Convolution and FullyConnected with them;
:mod:`mxkit_cuda.cudnn_batchnorm` and :mod:`mxkit_cuda.cudnn_pooling` use the rest).

The library comes from the ``nvidia-cudnn-cu12``/``-cu13`` wheels (``pip install
mxkit-cuda[cudnn]``) or the system. Without it, :func:`library` returns None and the
convolution kernels fall back to im2col and cuBLAS. Everything runs on the device's
compute stream (the legacy default stream, see :mod:`mxkit_cuda.backend`), or on the stream
recording a CUDA graph (:mod:`mxkit_cuda.graphs`).

For each convolution geometry (shapes, dtype, parameters) the descriptors are made once
and cached, with an algorithm per direction: with config ``cuda_conv_autotune`` (on by
default, as MXNet's ``MXNET_CUDNN_AUTOTUNE_DEFAULT``) the first call of each direction times
cuDNN's algorithms on its real buffers (``cudnnFind*AlgorithmEx``) and keeps the fastest;
off, the one cuDNN's heuristics rank first. Float32 math
uses TF32 tensor cores only when config ``cuda_tf32`` allows it (on by default, as
PyTorch does for convolutions); off, results match the CPU to float32 rounding.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
from collections.abc import Callable
from typing import Any

from mxkit.core import config
from mxkit.core.errors import DeviceError

from mxkit_cuda import graphs

DATA_TYPES = {"float32": 0, "float64": 1, "float16": 2}
_CROSS_CORRELATION = 1
_NCHW = 0
_DEFAULT_MATH, _TENSOR_OP_MATH, _FMA_MATH = 0, 1, 3
_WORKSPACE_LIMIT = 1 << 30
_MAX_ALGOS = 16
_lock = threading.RLock()  # for cached(): a plan made under it makes the handle under it too


class _Perf(ctypes.Structure):
    # cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout for the three
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int), ("mathType", ctypes.c_int),
                ("reserved", ctypes.c_int * 3)]


def _candidate_paths() -> list[str]:
    paths = ["libcudnn.so.9"]
    try:
        import nvidia.cudnn as wheel
    except ImportError:
        return paths
    for root in list(getattr(wheel, "__path__", [])):
        paths[:0] = sorted(glob.glob(os.path.join(root, "lib", "libcudnn.so.*")))
    return paths


@functools.cache
def library() -> Any:
    """The loaded cuDNN library, or None when it cannot be found or is not version 9."""
    for path in _candidate_paths():
        try:
            folder = os.path.dirname(path)
            if folder:  # the shim opens its sub-libraries by name: load them from the wheel first
                for sub in sorted(glob.glob(os.path.join(folder, "libcudnn_*.so.*"))):
                    try:
                        ctypes.CDLL(sub, mode=ctypes.RTLD_GLOBAL)
                    except OSError:
                        pass
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        if lib.cudnnGetVersion() // 10000 != 9:
            continue
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        return lib
    return None


def check(status: int, what: str) -> None:
    """Raise :class:`DeviceError` with cuDNN's message unless ``status`` is success."""
    if status != 0:
        message = library().cudnnGetErrorString(status).decode()
        raise DeviceError(f"cuDNN {what} failed: {message} (status {status})")


def _ints(values: Any) -> Any:
    values = [int(v) for v in values]
    return (ctypes.c_int * len(values))(*values)


class _Handle:
    """One cuDNN handle per device; its calls go to the calling thread's current stream
    (the compute stream, or a stream recording a CUDA graph: see :mod:`mxkit_cuda.graphs`)."""

    def __init__(self) -> None:
        lib = library()
        self.ptr = ctypes.c_void_p()
        check(lib.cudnnCreate(ctypes.byref(self.ptr)), "cudnnCreate")
        self.stream = 0
        check(lib.cudnnSetStream(self.ptr, ctypes.c_void_p(0)), "cudnnSetStream")
        self.lock = threading.Lock()

    def follow_current_stream(self) -> None:
        """Send the next calls to the current stream (call with :attr:`lock` held)."""
        import cupy

        stream = cupy.cuda.get_current_stream().ptr
        if stream != self.stream:
            check(library().cudnnSetStream(self.ptr, ctypes.c_void_p(stream)), "cudnnSetStream")
            self.stream = stream


_handles: dict[int, _Handle] = {}


def cached(cache: dict, key: Any, make: Callable[[], Any]) -> Any:
    """``cache[key]``, made by ``make()`` on its first use, once however many threads ask at that moment
    (handles, plans, descriptors and workspaces are each made once per device and shape)."""
    found = cache.get(key)
    if found is None:
        with _lock:
            found = cache.get(key)
            if found is None:
                found = cache[key] = make()
    return found


def current_handle() -> _Handle:
    """The cuDNN handle of the current device (made on first use)."""
    import cupy

    return cached(_handles, cupy.cuda.runtime.getDevice(), _Handle)


def tensor_descriptor(shape: tuple[int, ...], dtype: int) -> ctypes.c_void_p:
    """A packed (C-contiguous) tensor descriptor of ``shape`` with cuDNN data type ``dtype``."""
    lib = library()
    desc = ctypes.c_void_p()
    check(lib.cudnnCreateTensorDescriptor(ctypes.byref(desc)), "cudnnCreateTensorDescriptor")
    strides, step = [], 1
    for dim in reversed(shape):
        strides.insert(0, step)
        step *= dim
    check(lib.cudnnSetTensorNdDescriptor(desc, dtype, len(shape), _ints(shape), _ints(strides)),
           f"cudnnSetTensorNdDescriptor{shape}")
    return desc


class ConvPlan:
    """Descriptors and algorithms of one convolution geometry."""

    def __init__(self, x_shape: tuple[int, ...], w_shape: tuple[int, ...], y_shape: tuple[int, ...], dtype: str,
                 pad: tuple[int, ...], stride: tuple[int, ...], dilate: tuple[int, ...], groups: int,
                 tf32: bool) -> None:
        lib = library()
        self.handle = current_handle()
        code = DATA_TYPES[dtype]
        # 1-D convolutions are 2-D ones with a unit height: cuDNN wants at least 4-D tensors
        if len(x_shape) == 3:
            x_shape, w_shape, y_shape = ((*s[:2], 1, *s[2:]) for s in (x_shape, w_shape, y_shape))
            pad, stride, dilate = (0, *pad), (1, *stride), (1, *dilate)
        self.x, self.y = tensor_descriptor(x_shape, code), tensor_descriptor(y_shape, code)
        self.w = ctypes.c_void_p()
        check(lib.cudnnCreateFilterDescriptor(ctypes.byref(self.w)), "cudnnCreateFilterDescriptor")
        check(lib.cudnnSetFilterNdDescriptor(self.w, code, _NCHW, len(w_shape), _ints(w_shape)),
               "cudnnSetFilterNdDescriptor")
        self.conv = ctypes.c_void_p()
        check(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(self.conv)), "cudnnCreateConvolutionDescriptor")
        compute = DATA_TYPES["float32"] if dtype == "float16" else code
        check(lib.cudnnSetConvolutionNdDescriptor(self.conv, len(pad), _ints(pad), _ints(stride), _ints(dilate),
                                                   _CROSS_CORRELATION, compute), "cudnnSetConvolutionNdDescriptor")
        check(lib.cudnnSetConvolutionGroupCount(self.conv, groups), "cudnnSetConvolutionGroupCount")
        strict = dtype != "float16" and not tf32
        self.math = _FMA_MATH if strict else _TENSOR_OP_MATH if dtype == "float16" else _DEFAULT_MATH
        check(lib.cudnnSetConvolutionMathType(self.conv, self.math), "cudnnSetConvolutionMathType")
        h = self.handle.ptr
        self.searched: set[str] = set()  # directions whose algorithm was measured, not guessed
        self.forward = self._choose("cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionForwardWorkspaceSize",
                                    (h, self.x, self.w, self.conv, self.y))
        self.backward_data = self._choose("cudnnGetConvolutionBackwardDataAlgorithm_v7",
                                          "cudnnGetConvolutionBackwardDataWorkspaceSize",
                                          (h, self.w, self.y, self.conv, self.x))
        self.backward_filter = self._choose("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                                            "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                                            (h, self.x, self.y, self.conv, self.w))

    def _choose(self, finder: str, sizer: str, args: tuple) -> tuple[int, int]:
        lib = library()
        perfs = (_Perf * _MAX_ALGOS)()
        count = ctypes.c_int()
        check(getattr(lib, finder)(*args, _MAX_ALGOS, ctypes.byref(count), perfs), finder)
        for perf in perfs[:count.value]:
            if perf.status != 0:
                continue
            if self.math == _FMA_MATH and perf.mathType not in (_DEFAULT_MATH, _FMA_MATH):
                continue
            size = ctypes.c_size_t()
            if getattr(lib, sizer)(*args, perf.algo, ctypes.byref(size)) != 0 or size.value > _WORKSPACE_LIMIT:
                continue
            return perf.algo, size.value
        raise DeviceError(f"cuDNN has no usable algorithm for this convolution ({finder})")

    def search(self, direction: str, finder: str, descriptors_and_buffers: tuple) -> None:
        """Time cuDNN's algorithms for ``direction`` on real buffers and keep the fastest usable
        one (once; the output buffer is overwritten, which the caller is about to do anyway)."""
        if direction in self.searched:
            return
        self.searched.add(direction)
        import cupy

        lib = library()
        free, _ = cupy.cuda.runtime.memGetInfo()
        limit = min(_WORKSPACE_LIMIT, free // 2)  # leave the network its memory
        try:
            space = cupy.empty(max(limit, 1), dtype=cupy.uint8)
        except cupy.cuda.memory.OutOfMemoryError:
            return  # keep the heuristic choice
        perfs = (_Perf * _MAX_ALGOS)()
        count = ctypes.c_int()
        status = getattr(lib, finder)(self.handle.ptr, *descriptors_and_buffers, _MAX_ALGOS, ctypes.byref(count),
                                      perfs, pointer(space), ctypes.c_size_t(limit))
        del space
        if status != 0:
            return  # keep the heuristic choice
        for perf in perfs[:count.value]:  # sorted fastest first
            if perf.status != 0 or perf.memory > limit:
                continue
            if self.math == _FMA_MATH and perf.mathType not in (_DEFAULT_MATH, _FMA_MATH):
                continue
            setattr(self, direction, (perf.algo, perf.memory))
            return


def autotune() -> bool:
    """Whether convolution algorithms are measured on first use (config ``cuda_conv_autotune``)."""
    return bool(config.get("cuda_conv_autotune"))


_plans: dict[tuple, ConvPlan] = {}


def conv_plan(x: Any, w: Any, y_shape: tuple[int, ...], pad: Any, stride: Any, dilate: Any,
              groups: int, tf32: bool | None = None) -> ConvPlan:
    """The cached :class:`ConvPlan` of this geometry on the current device (float32 on TF32
    tensor cores as config ``cuda_tf32`` says, unless ``tf32`` says otherwise)."""
    import cupy

    tf32 = bool(config.get("cuda_tf32")) if tf32 is None else tf32
    key = (cupy.cuda.runtime.getDevice(), x.shape, w.shape, y_shape, x.dtype.name, tuple(pad), tuple(stride),
           tuple(dilate), groups, tf32)
    return cached(_plans, key, lambda: ConvPlan(tuple(x.shape), tuple(w.shape), tuple(y_shape), x.dtype.name,
                                                tuple(pad), tuple(stride), tuple(dilate), groups, tf32))


def scalars(dtype: Any) -> tuple[Any, Any]:
    """Pointers to 1 and 0 in the type cuDNN's alpha and beta take for data of ``dtype``."""
    kind = ctypes.c_double if dtype.name == "float64" else ctypes.c_float
    return ctypes.byref(kind(1.0)), ctypes.byref(kind(0.0))


class _Workspace:
    """The scratch buffer every cuDNN call of one device uses, grown to the largest need.

    One buffer, not one per call: every call runs on the device's compute stream (or is
    recorded and later replayed there), so calls never use it at the same time, and the
    device holds one workspace however many convolutions a network has, and however many
    CUDA graphs record them (each would otherwise keep its own in its memory pool). A buffer
    outgrown after a graph has been recorded may be what that graph uses: it is kept, not freed.
    """

    def __init__(self) -> None:
        self.buffer: Any = None
        self.made_at_capture = 0  # graphs.captures_begun() when the buffer was made
        self.kept: list[Any] = []
        self.lock = threading.Lock()

    def view(self, nbytes: int) -> Any:
        import cupy

        buffer = self.buffer
        if buffer is not None and buffer.nbytes >= nbytes:
            return buffer
        with self.lock:
            if self.buffer is None or self.buffer.nbytes < nbytes:
                if self.buffer is not None and graphs.captures_begun() != self.made_at_capture:
                    self.kept.append(self.buffer)  # a recording may launch kernels that use it
                self.made_at_capture = graphs.captures_begun()
                self.buffer = cupy.empty(max(nbytes, 1), dtype=cupy.uint8)
            return self.buffer

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in (self.buffer, *self.kept) if b is not None)


_workspaces: dict[int, _Workspace] = {}


def _workspace(nbytes: int) -> Any:
    import cupy

    return cached(_workspaces, cupy.cuda.runtime.getDevice(), _Workspace).view(nbytes)


def workspace_bytes(device: int) -> int:
    """Bytes of the cuDNN workspace of ``device`` (0 before its first cuDNN call)."""
    workspace = _workspaces.get(device)
    return workspace.nbytes if workspace is not None else 0


def pointer(array: Any) -> ctypes.c_void_p:
    """The device address of a CuPy array, for a cuDNN call."""
    return ctypes.c_void_p(array.data.ptr)


def _convolve(plan: ConvPlan, direction: str, a_desc: Any, a: Any, b_desc: Any, b: Any, out_desc: Any,
              out: Any) -> None:
    """One direction of the convolution: ``out = op(a, b)``. cuDNN's three calls and their
    algorithm searches take their operands in this same order."""
    finder, launcher = _DIRECTIONS[direction]
    one, zero = scalars(out.dtype)
    with plan.handle.lock:
        plan.handle.follow_current_stream()
        if autotune():
            plan.search(direction, finder, (a_desc, pointer(a), b_desc, pointer(b), plan.conv, out_desc, pointer(out)))
        algo, size = getattr(plan, direction)
        space = _workspace(size)
        call = getattr(library(), launcher)
        check(call(plan.handle.ptr, one, a_desc, pointer(a), b_desc, pointer(b), plan.conv, algo, pointer(space),
                   ctypes.c_size_t(size), zero, out_desc, pointer(out)), launcher)


_DIRECTIONS = {
    "forward": ("cudnnFindConvolutionForwardAlgorithmEx", "cudnnConvolutionForward"),
    "backward_data": ("cudnnFindConvolutionBackwardDataAlgorithmEx", "cudnnConvolutionBackwardData"),
    "backward_filter": ("cudnnFindConvolutionBackwardFilterAlgorithmEx", "cudnnConvolutionBackwardFilter"),
}


def forward(plan: ConvPlan, x: Any, w: Any, y: Any) -> None:
    """``y = conv(x, w)`` (all C-contiguous)."""
    _convolve(plan, "forward", plan.x, x, plan.w, w, plan.y, y)


def backward_data(plan: ConvPlan, w: Any, dy: Any, dx: Any) -> None:
    """``dx`` = the data gradient of the convolution for output gradient ``dy``."""
    _convolve(plan, "backward_data", plan.w, w, plan.y, dy, plan.x, dx)


def backward_filter(plan: ConvPlan, x: Any, dy: Any, dw: Any) -> None:
    """``dw`` = the weight gradient of the convolution for output gradient ``dy``."""
    _convolve(plan, "backward_filter", plan.x, x, plan.y, dy, plan.w, dw)
