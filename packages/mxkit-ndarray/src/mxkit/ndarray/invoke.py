"""Imperative dispatch: run one registry operator on NDArrays through the engine.

Shapes and dtypes are inferred here, synchronously, so a bad call fails at the line that
made it with the operator, its parameters and the input shapes; the outputs are
allocated, and the kernel is pushed to the engine reading the inputs' vars and writing
the outputs'. A kernel that fails raises at the next sync point (``asnumpy``,
``wait_to_read``, ``mx.nd.waitall``) with the same description.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit.core.context import Context, current_context
from mxkit.core.errors import DeviceError, DTypeError, MXKitError, OutOfMemoryError, ShapeError
from mxkit.ndarray import autograd
from mxkit.ndarray.backend import Backend, backend_of
from mxkit.ndarray.registry import OpDef, get_registry

_numpy_dtypes: dict[str, Any] = {}
_engine_holder: list[Any] = []
_lock = threading.Lock()


class OperatorError(MXKitError):
    """An operator's kernel failed; the message names the operator, parameters and input shapes."""


_backend_by_id: dict[int, tuple[Context, Any]] = {}


def fast_backend(ctx: Context) -> Backend:
    """:func:`backend_of` keyed by the Context object's identity (hashing a Context runs Python code)."""
    entry = _backend_by_id.get(id(ctx))
    if entry is not None and entry[0] is ctx:
        return entry[1]
    backend = backend_of(ctx)
    if len(_backend_by_id) > 256:  # contexts come and go (mx.cpu() makes a new one): stay small
        _backend_by_id.clear()
    _backend_by_id[id(ctx)] = (ctx, backend)
    return backend


def on_device(ctx: Context, backend: Backend, fn: Any) -> Any:
    """``fn`` bound to its device by :meth:`Backend.bind_to_device` (a GPU: kernels launch on the
    thread's current device); on a CPU, ``fn`` itself."""
    if ctx.device_type == "cpu":
        return fn
    return backend.bind_to_device(fn)


def numpy_dtype(name: str) -> Any:
    """numpy dtype of a canonical dtype name (cached)."""
    dtype = _numpy_dtypes.get(name)
    if dtype is None:
        from mxkit.core.dtypes import to_numpy

        dtype = _numpy_dtypes[name] = to_numpy(name)
    return dtype


def engine() -> Any:
    """The process engine."""
    return _engine_get()


def _engine_get() -> Any:
    global _engine_get
    import mxkit.engine

    _engine_get = mxkit.engine.get  # later calls go straight to the engine package
    return _engine_get()


_dtype_names: dict[Any, str] = {}


def dtype_name_of(dtype: Any) -> str:
    """Canonical name of a numpy dtype (cached: ``dtype.name`` is slow in numpy)."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name
    return name


def resolve_context(ctx: Any) -> Context:
    """A Context from ``None`` (the current one), a Context, or a string like ``"cpu(1)"``/``"cpu"``."""
    if ctx is None:
        return current_context()
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, str):
        text = ctx.strip()
        if text.endswith(")") and "(" in text:
            kind, _, rest = text[:-1].partition("(")
            return Context(kind, int(rest))
        return Context(text, 0)
    raise DeviceError(f"expected a Context like mx.cpu(0) or a string like 'cpu(0)', got {ctx!r}")


_from_data: Any = None


def _load_ndarray() -> Any:
    global _from_data
    from mxkit.ndarray.ndarray import NDArray

    _from_data = NDArray._from_data
    return _from_data


#: var -> elements of the whole array it orders, for the vars that have smaller views
_viewed_sizes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_view(var: Any, whole_size: int, view_size: int) -> None:
    """Record that ``var`` orders a view of ``view_size`` of its ``whole_size`` elements."""
    if view_size < whole_size and _viewed_sizes.get(var, 0) < whole_size:
        _viewed_sizes[var] = whole_size


def _format_bytes(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{nbytes} bytes"  # pragma: no cover


def allocate(backend: Any, shape: Sequence[int], dtype: Any, ctx: Any, what: str = "an array") -> Any:
    """``backend.empty(shape, dtype)``, with a clear :class:`OutOfMemoryError` when the
    array cannot exist (more bytes than the device has, or than an address can span)."""
    shape = tuple(shape)
    try:
        return backend.empty(shape, dtype)
    except (MemoryError, ValueError, OverflowError) as exc:
        count = 1
        for extent in shape:
            count *= int(extent)
        nbytes = count * np.dtype(dtype).itemsize
        if not isinstance(exc, MemoryError) and nbytes < 2**62:
            raise  # not about the size (the size of an address space is 2**63 bytes at most)
        raise OutOfMemoryError(
            f"cannot allocate {what} of shape {shape} and dtype {np.dtype(dtype).name} on {ctx}: it needs "
            f"{_format_bytes(nbytes)}, more than the device can allocate ({type(exc).__name__}: {exc}); "
            f"use a smaller shape or batch size") from None


def covers_its_var(array: Any) -> bool:
    """True if ``array`` is all of the storage its engine var orders (not a view of part
    of it): only then does writing all of ``array`` overwrite the var whole."""
    whole = _viewed_sizes.get(array._var)
    return whole is None or array._data.size >= whole


def _var_list(arrays: Sequence[Any], exclude: list[Any]) -> list[Any]:
    out: list[Any] = []
    for array in arrays:
        var = array._var
        if var not in out and var not in exclude:
            out.append(var)
    return out


class _InFlight:
    """Bounds the bytes of operator outputs a thread pushed that may not be computed yet.

    A Python thread can push large operators far faster than they run; every pending one
    holds a fresh output buffer, so memory grows and buffers cannot be recycled. Past
    :attr:`limit` bytes (or three outputs of the current size, if more) the pushing thread
    waits for its own oldest outputs, which lets the backend recycle their buffers while they
    are warm (MXNet leaves this to its memory pool). Outputs under 64 KiB are not counted.
    An error met while waiting stays on its var and is raised at the user's next read of it.

    Each thread counts and waits for its own outputs only: one thread must never wait for
    another's, whose completion may hang on the first (two workers of a ``dist_sync`` job in
    one process: a pull completes once every worker has pushed, and a worker that waited for
    the other's pull before pushing would wait forever).
    """

    limit = 4 * 1024 * 1024

    def __init__(self) -> None:
        self._threads = threading.local()

    def _mine(self) -> Any:
        """This thread's state: its queue of (engine, var, bytes) and their bytes."""
        mine = self._threads
        if not hasattr(mine, "queue"):
            mine.queue, mine.bytes, mine.exempt = collections.deque(), 0, False
        return mine

    def exempt_this_thread(self) -> None:
        """Never make the calling thread wait: a custom operator's thread pushes from inside an
        engine operation, and the oldest outputs may be that operation's own (it would wait for itself)."""
        self._mine().exempt = True

    def add(self, eng: Any, var: Any, nbytes: int) -> None:
        if nbytes < 65536:
            return
        mine = self._mine()
        if mine.exempt:
            return
        queue = mine.queue
        queue.append((eng, var, nbytes))
        mine.bytes += nbytes
        # a few outputs may always be in flight, so that huge operators still overlap
        bound = max(self.limit, 3 * nbytes)
        if mine.bytes <= bound:
            return
        oldest = []
        while mine.bytes > bound // 2 and queue:
            entry = queue.popleft()
            mine.bytes -= entry[2]
            oldest.append(entry)
        for old_engine, old_var, _ in oldest:
            try:
                old_engine.wait_for_var(old_var)
            except MXKitError:
                # the error stays on the var: the user's own read of that array raises it
                pass

    def forget_in_child(self) -> None:
        """After ``os.fork()``, in the child: the parent's pending outputs are not the child's
        to wait for."""
        self._threads = threading.local()


in_flight = _InFlight()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=in_flight.forget_in_child)

#: Operations whose inputs and outputs together hold fewer bytes than this are pushed as
#: ``small``: an engine may run them on the pushing thread when they can start at once,
#: which saves the hand-over to a worker and back (10-40 µs, 80 under load). Up to 2 MiB a
#: kernel costs about as much as that hand-over or a little more (an add of 1e5 float32:
#: 14-30 µs; a 256x256 product: ~0.4 ms, measured 470 µs queued against 390 inline), so
#: running it in place loses nothing; larger ones stay queued, and a stream of them
#: overlaps with the Python that pushes it.
SMALL_OP_BYTES = 2 * 1024 * 1024


def push_kernel(eng: Any, fn: Any, reads: list, writes: list, ctx: Context, name: str, nbytes: int | None) -> None:
    """Push a synchronous kernel touching ``nbytes`` bytes (None: more than a small one, such as
    a whole phase of an executor): as ``small`` when the engine's type says its push takes the
    flag (class attribute ``inline_small_ops``: read on the type, so that a wrapper forwarding
    attributes to such an engine is pushed to without it) and the kernel is short for the
    thread that runs it: a small CPU kernel, or any kernel of a device whose backend only
    queues work (:attr:`Backend.launches_asynchronously`, a GPU). A plain push otherwise."""
    if getattr(type(eng), "inline_small_ops", False) and (
            (ctx.device_type == "cpu" and nbytes is not None and nbytes < SMALL_OP_BYTES)
            or (ctx.device_type != "cpu" and fast_backend(ctx).launches_asynchronously)):
        eng.push(fn, reads, writes, ctx, 0, name, False, True)
    else:
        eng.push(fn, reads, writes, ctx, 0, name)


#: (operator, typed parameters, input shapes and dtypes) -> (output shapes, output dtypes).
#: Inference is a pure function of these and costs more than the rest of a small call (a
#: FullyConnected's checks take ~10 µs); a loop calls the same operator on the same shapes.
_inferred: dict[tuple, tuple[list, list]] = {}
_INFERRED_LIMIT = 4096


def remember(cache: dict, key: Any, value: Any, limit: int) -> None:
    """Store ``value`` in a dispatch cache, emptying it first once it holds ``limit`` entries
    (calls with ever new shapes or parameters must not grow it without bound)."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value


def _inferred_outputs(op: OpDef, params: dict[str, Any], in_data: list, in_shapes: list,
                      num_aux: int) -> tuple[list, list]:
    """Output shapes and dtype names of ``op`` on these inputs (cached); errors name the call."""
    # auxiliary states (BatchNorm's moving statistics) follow the inputs: not inferred, written
    infer_data = in_data[:len(in_data) - num_aux] if num_aux else in_data
    try:
        key = (op.name, *params.items(), *in_shapes, *[data.dtype for data in infer_data])
        found = _inferred.get(key)
    except TypeError:  # an unhashable parameter value (a list): infer every time
        key, found = None, None
    if found is not None:
        return found
    try:
        out_shapes = op.infer_shape(params, in_shapes[:len(infer_data)] if num_aux else in_shapes)
        out_dtypes = op.infer_dtype(params, [dtype_name_of(data.dtype) for data in infer_data])
    except (ShapeError, DTypeError) as exc:
        raise type(exc)(f"{op.describe_call(params, in_shapes)}: {exc}") from None
    except MXKitError:
        raise
    except (ValueError, TypeError, IndexError) as exc:
        raise ShapeError(f"{op.describe_call(params, in_shapes)}: {exc}") from None
    found = ([tuple(shape) for shape in out_shapes], list(out_dtypes))
    if key is not None:
        remember(_inferred, key, found, _INFERRED_LIMIT)
    return found


def inferred_outputs(op: OpDef, params: dict[str, Any], inputs: Sequence[Any]) -> tuple[list, list]:
    """The output shapes (tuples) and dtype names :func:`invoke` infers for ``op`` on the
    NDArrays ``inputs`` with typed ``params`` (cached as for invoke).

    Raises
    ------
    ShapeError, DTypeError
        When inference fails; the message names the call.
    """
    in_data = [array._data for array in inputs]
    return _inferred_outputs(op, params, in_data, [data.shape for data in in_data], len(op.list_aux(params)))


def invoke(op: OpDef, inputs: Sequence[Any], params: dict[str, Any], out: Any = None,
           ctx: Context | None = None) -> list[Any]:
    """Run ``op`` on NDArrays ``inputs`` with typed ``params``; return the output NDArrays.

    Parameters
    ----------
    op : OpDef
        The operator.
    inputs : sequence of NDArray
        Its inputs, all on one context.
    params : dict
        Typed parameters (see :meth:`OpDef.parse_params`).
    out : NDArray or list of NDArray, optional
        Where to write the outputs (shapes must match what the operator infers); in a list,
        ``None`` stands for an output allocated as without ``out``.
    ctx : Context, optional
        The device of an operator without inputs (default: the current context).

    Raises
    ------
    ShapeError, DTypeError
        When shape or dtype inference fails; the message names the call.
    DeviceError
        When the inputs live on different devices.
    """
    # one pass over the inputs: their device, data, shapes and engine vars (each var once: an input also
    # written is an in-place update, so it inherits errors)
    in_data: list = []
    in_shapes: list = []
    reads: list = []
    in_bytes = 0
    if inputs:
        ctx = inputs[0]._ctx
        for array in inputs:
            if array._ctx is not ctx and array._ctx != ctx:
                raise DeviceError(f"{op.describe_call(params, [a.shape for a in inputs])}: inputs are on "
                                  f"different devices ({', '.join(str(a._ctx) for a in inputs)}); move them "
                                  f"to one with as_in_context()")
            data = array._data
            in_data.append(data)
            in_shapes.append(data.shape)
            in_bytes += data.nbytes
            var = array._var
            if var not in reads:
                reads.append(var)
    elif ctx is None:
        ctx = current_context()
    num_aux = len(op.list_aux(params)) if op.aux_names else 0
    out_shapes, out_dtypes = _inferred_outputs(op, params, in_data, in_shapes, num_aux)
    backend = fast_backend(ctx)
    eng = _engine_get()
    if out is None:
        make = _from_data or _load_ndarray()
        outputs = []
        for shape, dtype in zip(out_shapes, out_dtypes):
            dtype = _numpy_dtypes.get(dtype) or numpy_dtype(dtype)
            try:
                data = backend.empty(shape, dtype)
            except (MemoryError, ValueError, OverflowError):  # again, to raise the error that names the size
                data = allocate(backend, shape, dtype, ctx, f"the output of {op.name}")
            outputs.append(make(data, ctx, eng.new_var()))
    else:
        outputs = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(outputs) != len(out_shapes):
            raise ShapeError(f"{op.describe_call(params, in_shapes)}: got {len(outputs)} out arrays for "
                             f"{len(out_shapes)} outputs")
        for index, (target, shape, dtype) in enumerate(zip(outputs, out_shapes, out_dtypes)):
            if target is None:  # this one is allocated; the others are written in place
                make = _from_data or _load_ndarray()
                outputs[index] = make(allocate(backend, shape, _numpy_dtypes.get(dtype) or numpy_dtype(dtype), ctx,
                                               f"the output of {op.name}"), ctx, eng.new_var())
                continue
            if target._data.shape != tuple(shape):
                raise ShapeError(f"{op.describe_call(params, in_shapes)}: out has shape {target.shape}, "
                                 f"the result has shape {tuple(shape)}")
            if target._ctx is not ctx and target._ctx != ctx:
                raise DeviceError(f"{op.describe_call(params, in_shapes)}: out is on {target._ctx}, the "
                                  f"inputs on {ctx}")
    if len(outputs) == 1:
        out_data = [outputs[0]._data]
        writes = [outputs[0]._var]
    else:
        out_data = [array._data for array in outputs]
        writes = _var_list(outputs, [])
    if num_aux:
        writes = _var_list(list(outputs) + list(inputs[len(inputs) - num_aux:]), [])
    for target in outputs if out is not None else ():  # (one allocated here covers its var)
        if target._var not in reads and not covers_its_var(target):
            reads.append(target._var)  # writes part of its var: the rest keeps any error
    kernel = op.kernels.get(backend.name) or op.kernel or op.kernel_for(backend.name)
    xp = backend.xp
    run_params = params
    if autograd._state.training:
        run_params = dict(params, _is_train=True)  # missing means prediction, as in MXNet
    if op.needs_rng:
        from mxkit.ndarray.random import generator_state

        state = generator_state(ctx)
        run_params = dict(run_params, _rng=state.generator_proxy())
        writes.append(state.var)

    def run() -> None:
        try:
            kernel(xp, in_data, out_data, run_params)
        except Exception as exc:
            raise OperatorError(f"{op.describe_call(params, in_shapes)} failed: {type(exc).__name__}: {exc}") \
                from exc

    if op.async_kernel is not None:
        # the operator's work leaves the engine worker at once (Custom: Python code that may
        # itself push and wait); it completes the operation through on_complete
        start = op.async_kernel

        def run_async(on_complete: Any) -> None:
            start(ctx, in_data, out_data, run_params, on_complete)

        eng.push_async(run_async, reads, writes, ctx, 0, op.name)
    else:
        nbytes = in_bytes
        for data in out_data:
            nbytes += data.nbytes
        push_kernel(eng, run if ctx.device_type == "cpu" else backend.bind_to_device(run), reads, writes, ctx,
                    op.name, nbytes)
    if out is None and out_data and out_data[0].nbytes >= 65536:
        # only fresh buffers count: an update written in place (out=weight) holds no new memory, and
        # waiting on it would stall every per-key update of a multi-device store behind the previous ones
        in_flight.add(eng, writes[0], out_data[0].nbytes)
    state = autograd._state
    if state.recording:
        autograd.record_op(op, params, inputs, outputs)
    elif state.capture is not None:  # a backward pass notes its calls for later replays
        state.capture.invoked(op, inputs, params, out, ctx, outputs)
    return outputs


def invoke_by_name(name: str, *inputs: Any, out: Any = None, ctx: Any = None, **params: Any) -> Any:
    """Run the registry operator ``name``; one output is returned bare, several as a list."""
    op = get_registry().get(name)
    typed = parsed_params(op, params)
    outputs = invoke(op, list(inputs), typed, out=out, ctx=resolve_context(ctx) if ctx is not None else None)
    return outputs[0] if len(outputs) == 1 else outputs


def parsed_params(op: OpDef, params: dict[str, Any]) -> dict[str, Any]:
    """``op.parse_params(params)``, remembered for hashable values as ``mx.nd.<op>`` calls do
    (gradient functions call their backward operators with the same parameters every step);
    each call gets its own copy of the typed dict."""
    global _cached_parse
    if _cached_parse is None:
        from mxkit.ndarray.op_functions import _parsed_params  # (it imports this module)

        _cached_parse = _parsed_params
    return _cached_parse(op, params)  # type: ignore[no-any-return]


_cached_parse: Any = None


def push_raw(fn: Any, reads: Sequence[Any], writes: Sequence[Any], ctx: Context, name: str,
             copy: bool = False, overwrites: bool = False, nbytes: int | None = None) -> None:
    """Push a plain function reading and writing the given NDArrays (indexing, copies).

    ``copy=True`` marks a transfer between devices: it runs on the device's copy workers.
    ``overwrites=True`` says that ``fn`` writes every element of ``writes``: a target
    that is all of its var's storage then loses an error it held (a failed op's output
    becomes usable again); otherwise the targets count as read too, and an error on one
    skips ``fn`` and stays. ``nbytes``: the bytes ``fn`` touches, when it is a kernel that
    takes about that long (a copy within a device): pushed as :func:`push_kernel` does,
    a small one may run on the calling thread.
    """
    if autograd._state.capture is not None:
        autograd._state.capture.spoil()  # a backward replay would not repeat this push
    write_vars = _var_list(writes, [])
    read_vars = _var_list(reads, [])
    for array in writes:
        if (not overwrites or not covers_its_var(array)) and array._var not in read_vars:
            read_vars.append(array._var)
    eng = engine()
    if nbytes is not None and not copy:
        push_kernel(eng, on_device(ctx, fast_backend(ctx), fn), read_vars, write_vars, ctx, name, nbytes)
        return
    eng.push(on_device(ctx, fast_backend(ctx), fn), read_vars, write_vars, ctx, 0, name, copy)


__all__ = ["OperatorError", "backend_of", "engine", "inferred_outputs", "invoke", "invoke_by_name", "numpy_dtype",
           "on_device", "parsed_params", "push_kernel", "push_raw", "resolve_context"]
