"""The NDArray: an array on a device whose operations run asynchronously on the engine.

An NDArray is a backend array (its storage, or a strided view of it: offset and strides
live in that view) plus a context and an engine var. Views made by basic slicing and
``reshape`` share the storage *and the var* of their parent, so a write through a view
is ordered with every other operation on the parent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.context import Context
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.engine.profiler import memory_state as _memory_profile
from mxkit.ndarray import invoke as _invoke_module
from mxkit.ndarray.autograd import _state as _autograd_state
from mxkit.ndarray.autograd import record_op as _record_op
from mxkit.ndarray.invoke import engine, invoke, invoke_by_name
from mxkit.ndarray.registry import get_registry

#: MXNet's name for the builtin ``slice`` in this module (where ``slice`` is the operator);
#: code written for MXNet imports it to test for slice indices
py_slice = slice

#: MXNet's storage-type ids, as written in a ``__storage_type__`` symbol attribute and in
#: ``.params`` files; MXNet code imports the underscore name from ``mxnet.ndarray.ndarray``.
STORAGE_TYPE_STR_TO_ID: dict[str, int] = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
_STORAGE_TYPE_STR_TO_ID = STORAGE_TYPE_STR_TO_ID

_BINARY = {
    # python operator: (broadcast op, scalar op, reversed scalar op)
    "add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
    "sub": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "mul": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "div": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "mod": ("broadcast_mod", "_mod_scalar", "_rmod_scalar"),
    "pow": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
    "eq": ("broadcast_equal", "_equal_scalar", "_equal_scalar"),
    "ne": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar"),
    "gt": ("broadcast_greater", "_greater_scalar", "_lesser_scalar"),
    "ge": ("broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar"),
    "lt": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar"),
    "le": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar"),
}


_BINARY_OPS: dict[str, tuple[Any, Any, Any]] = {}
_NO_PARAMS: dict[str, Any] = {}


def _binary_ops(kind: str) -> tuple[Any, Any, Any]:
    registry = get_registry()
    ops = _BINARY_OPS[kind] = tuple(registry.get(name) for name in _BINARY[kind])
    return ops


def _same_shape_elementwise(op: Any, inputs: list, params: dict, into: NDArray | None = None) -> NDArray:
    """The hot path of ``a + b``, ``a + 1`` and ``a -= b``: inputs of one shape, dtype and device give an
    output of that shape and dtype, so inference is skipped; everything else is as in
    :func:`~mxkit.ndarray.invoke.invoke` (the registry's kernel, pushed to the engine). ``into``: the first
    input, written in place (the callers check that it is, and that autograd is not recording), else a new array."""
    first = inputs[0]
    data = first._data
    ctx = first._ctx
    backend = _invoke_module.fast_backend(ctx)
    eng = _invoke_module._engine_get()
    if into is None:
        out_data = backend.empty(data.shape, data.dtype)
        result = NDArray._from_data(out_data, ctx, eng.new_var())
    else:  # (its var is the first input's: read and written, so an error before it carries over, as in invoke)
        out_data, result = data, into
    kernel = op.kernels.get(backend.name) or op.kernel or op.kernel_for(backend.name)
    xp = backend.xp
    in_data = [array._data for array in inputs]
    outputs = [out_data]

    def run() -> None:
        try:
            kernel(xp, in_data, outputs, params)
        except Exception as exc:
            raise _invoke_module.OperatorError(
                f"{op.describe_call(params, [d.shape for d in in_data])} failed: {type(exc).__name__}: {exc}"
            ) from exc

    reads = [first._var]
    if len(inputs) > 1 and inputs[1]._var is not first._var:
        reads.append(inputs[1]._var)
    _invoke_module.push_kernel(eng, run if ctx.device_type == "cpu" else backend.bind_to_device(run), reads,
                               [result._var], ctx, op.name, out_data.nbytes * (1 + len(inputs)))
    if into is not None:  # an update in place holds no new memory (see invoke)
        return result
    if out_data.nbytes >= 65536:
        _invoke_module.in_flight.add(eng, result._var, out_data.nbytes)
    capture = _autograd_state.capture
    if capture is not None:  # a backward pass notes its calls for later replays
        capture.invoked(op, inputs, params, None, ctx, [result])
    return result


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float, np.number, np.bool_)) and not isinstance(value, np.ndarray)


class NDArray:
    """An n-dimensional array on a device (MXNet's ``mx.nd.NDArray``).

    Make one with :func:`mxkit.ndarray.array`, :func:`~mxkit.ndarray.zeros` and friends;
    operations return new arrays immediately while their work runs on the engine.
    """

    __slots__ = ("__weakref__", "_ag", "_ctx", "_data", "_fresh_grad", "_grad", "_grad_req", "_sparse_grad", "_var")
    __array_priority__ = 1000.0  # numpy defers to NDArray's reflected operators

    def __init__(self, *args: Any, **kwargs: Any):
        raise MXKitError("NDArray is not made directly; use mx.nd.array(), mx.nd.zeros(), mx.nd.empty() ...")

    @classmethod
    def _from_data(cls, data: Any, ctx: Context, var: Any) -> NDArray:
        self = object.__new__(cls)
        self._data = data
        self._ctx = ctx
        self._var = var
        self._ag = None
        self._grad = None
        self._grad_req = "null"
        # the row_sparse/csr form of the gradient, when one was asked for (attach_grad(stype=...))
        self._sparse_grad = None
        # set by backward when it writes this variable's gradient; cleared by whoever consumes it
        # (MXNet's flag, which Gluon's Trainer reads to find stale gradients)
        self._fresh_grad = False
        if _memory_profile.on:  # profile_memory: count the storage (views share the var: once)
            from mxkit.engine.profiler import track_ndarray

            track_ndarray(self)
        return self

    @classmethod
    def from_storage(cls, storage: Any, ctx: Context, var: Any = None) -> NDArray:
        """An NDArray over a backend array (``numpy.ndarray``, ``cupy.ndarray``, ...) without a copy.

        Parameters
        ----------
        storage : array
            The backend's array; the NDArray owns it from now on (nothing else should write it).
        ctx : Context
            The device ``storage`` lives on.
        var : engine var, optional
            The engine var that orders operations on ``storage``. Give another array's
            :attr:`var` to make a view that shares its ordering; by default a new var.
        """
        if var is None:
            from mxkit.ndarray.invoke import engine

            var = engine().new_var()
        return cls._from_data(storage, ctx, var)

    def _view(self, data: Any) -> NDArray:
        """An NDArray over ``data`` (a view of this array's storage) sharing its var."""
        _invoke_module.note_view(self._var, self._data.size, data.size)
        if _autograd_state.capture is not None:
            _autograd_state.capture.spoil()  # a backward replay would not make this view
        return NDArray._from_data(data, self._ctx, self._var)

    # ---- properties --------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape (a tuple of ints)."""
        return self._data.shape

    @property
    def dtype(self) -> type:
        """The element type, as a numpy scalar type (``numpy.float32``), like MXNet."""
        return self._data.dtype.type

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    @property
    def context(self) -> Context:
        """The device of this array."""
        return self._ctx

    ctx = context

    @property
    def stype(self) -> str:
        """Storage type: always ``"default"`` (dense)."""
        return "default"

    def tostype(self, stype: str) -> Any:
        """A copy in storage type ``stype``: ``"default"`` (dense), ``"row_sparse"`` (the rows
        with a nonzero element, a :class:`~mxkit.ndarray.sparse.RowSparseNDArray`) or
        ``"csr"`` (the nonzero values of a 2-D array, a :class:`~mxkit.ndarray.csr.CSRNDArray`)."""
        from mxkit.ndarray.sparse_ops import cast_storage

        return cast_storage(self, stype)

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides of this array (a view may be non-contiguous)."""
        return self._data.strides

    @property
    def storage(self) -> Any:
        """The backend array that holds the elements, read **without waiting** for the engine.

        For code that runs inside an engine operation which declared this array's :attr:`var`
        (kernels, executors, kvstore transfers): outside one, pending writes may not have
        happened yet; use :meth:`asnumpy` or :meth:`wait_to_read` first.
        """
        return self._data

    @property
    def var(self) -> Any:
        """The engine var that orders operations on this array's storage."""
        return self._var

    @property
    def T(self) -> NDArray:
        """The transpose (a new array)."""
        return self.transpose()

    @property
    def grad(self) -> Any:
        """The gradient buffer made by :meth:`attach_grad` (``None`` before); a row_sparse or
        csr array when ``attach_grad`` was given that ``stype``."""
        return self._grad if self._sparse_grad is None else self._sparse_grad

    # ---- synchronization and host copies ---------------------------------------------

    def wait_to_read(self) -> None:
        """Block until every pending write to this array is done (re-raising its error)."""
        engine().wait_for_var(self._var)

    def wait_to_write(self) -> None:
        """Block until every pending read and write of this array is done."""
        eng = engine()
        # read and written: a marker that overwrites nothing (an error on the array stays)
        eng.push(lambda: None, [self._var], [self._var], self._ctx, 0, "wait_to_write")
        eng.wait_for_var(self._var)

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the data (waits for pending writes)."""
        self.wait_to_read()
        ctx = self._ctx
        host = self._data if ctx.device_type == "cpu" else _invoke_module.backend_of(ctx).to_host(self._data)
        return np.array(host, copy=True)

    def asscalar(self) -> Any:
        """The value of a one-element array as a numpy scalar."""
        if self.size != 1:
            raise ShapeError(f"asscalar needs an array of exactly one element, this one has shape {self.shape}")
        return self.asnumpy().reshape(())[()]

    def item(self) -> Any:
        """The value of a one-element array as a Python scalar."""
        return self.asscalar().item()

    def tolist(self) -> list:
        """The data as nested Python lists."""
        return self.asnumpy().tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.asnumpy()
        return array if dtype is None else array.astype(dtype)

    def __reduce__(self) -> tuple:
        # pickle (as MXNet's NDArray): the values, on the default device when unpickled
        from mxkit.ndarray.creation import array

        return (array, (self.asnumpy(), None, self._data.dtype))

    def __getstate__(self) -> dict:
        """MXNet's pickled state of an NDArray: ``{"handle": <one array record>}``."""
        from mxkit.ndarray.serialization import dumps_record

        return {"handle": bytearray(dumps_record(self.asnumpy()))}

    def __setstate__(self, state: dict) -> None:
        """Become the array of MXNet's pickled state (``__getstate__``, or MXNet's own pickles):
        on the device it was saved from when that device exists here, otherwise on the CPU, as
        MXNet loads a GPU array in a process without GPUs."""
        from mxkit.core.context import Context, cpu
        from mxkit.ndarray.creation import array
        from mxkit.ndarray.serialization import SparseArray, loads_record

        if not isinstance(state, dict) or "handle" not in state:
            raise MXKitError(f"NDArray.__setstate__ expects MXNet's state {{'handle': bytes}}, got {state!r:.80}")
        record = loads_record(state["handle"])
        value = record.value
        if value is None:
            raise MXKitError("NDArray.__setstate__: the state holds a none array (no shape), which has no values")
        if isinstance(value, SparseArray):
            value = value.todense()
        loaded = None
        if record.device_type not in (None, "cpu", "cpu_pinned", "cpu_shared"):
            try:
                loaded = array(value, ctx=Context(record.device_type, record.device_id or 0), dtype=value.dtype)
            except MXKitError:  # that device (or its backend) is not here
                loaded = None
        if loaded is None:
            loaded = array(value, ctx=cpu(), dtype=value.dtype)
        for slot in ("_data", "_ctx", "_var", "_ag", "_grad", "_grad_req", "_fresh_grad", "_sparse_grad"):
            object.__setattr__(self, slot, getattr(loaded, slot))

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape} @{self._ctx}>"

    def __str__(self) -> str:
        return repr(self)

    # ---- copies, dtype, devices -------------------------------------------------------

    def copy(self) -> NDArray:
        """A deep copy on the same device."""
        return invoke_by_name("_copy", self)

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        """This array cast to ``dtype`` (``self`` when ``copy=False`` and the dtype matches)."""
        from mxkit.core.dtypes import dtype_name

        if not copy and dtype_name(dtype) == self._data.dtype.name:
            return self
        return invoke_by_name("Cast", self, dtype=dtype)

    def copyto(self, other: NDArray | Context) -> NDArray:
        """Copy into ``other`` (an NDArray, of the same shape) or a new array on device ``other``."""
        from mxkit.ndarray.creation import empty

        if isinstance(other, Context):
            target = empty(self.shape, ctx=other, dtype=self._data.dtype)
        elif isinstance(other, NDArray):
            if other is self:
                return self
            if other.shape != self.shape:
                raise ShapeError(f"copyto: source shape {self.shape} differs from target shape {other.shape}")
            target = other
        elif getattr(other, "stype", None) in ("row_sparse", "csr"):
            if tuple(other.shape) != self.shape:
                raise ShapeError(f"copyto: source shape {self.shape} differs from target shape {other.shape}")
            other[:] = self  # a sparse target keeps its storage: the nonzero part of these values
            return other
        else:
            raise MXKitError(f"copyto takes an NDArray, a sparse array or a Context, got {type(other).__name__}")
        from mxkit.ndarray.transfer import copy_into

        copy_into(target, self)
        return target

    def as_in_context(self, context: Context) -> NDArray:
        """This array if it is on ``context``, else a copy there."""
        return self if context == self._ctx else self.copyto(context)

    def detach(self) -> NDArray:
        """A view of the same data outside the autograd graph."""
        return self._view(self._data)

    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Allocate a gradient buffer and mark this array as a variable for autograd.

        ``stype="row_sparse"`` (or ``"csr"``) makes :attr:`grad` that storage, as MXNet's: a
        row_sparse gradient holds the rows with a nonzero gradient (an embedding's looked-up
        rows), which the optimizers update lazily.
        """
        from mxkit.ndarray.autograd import mark_variables
        from mxkit.ndarray.sparse import zeros
        from mxkit.ndarray.sparse_base import check_stype

        stype = check_stype(stype, "attach_grad")
        mark_variables([self], [zeros(stype, self.shape, ctx=self._ctx, dtype=self._data.dtype)], grad_req)

    def backward(self, out_grad: NDArray | None = None, retain_graph: bool = False,
                 train_mode: bool = True) -> None:
        """Compute the gradients of this array with respect to the marked variables."""
        from mxkit.ndarray.autograd import backward

        backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    # ---- shape ------------------------------------------------------------------------

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        """A reshaped array, with MXNet's codes (0, -1, -2, -3, -4); a view when possible."""
        from mxkit.ndarray import autograd
        from mxkit.ndarray.shapes import infer_reshape

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if "shape" in kwargs:
            shape = tuple(kwargs.pop("shape"))
        reverse = bool(kwargs.pop("reverse", False))
        if kwargs:
            raise MXKitError(f"reshape got unknown arguments {sorted(kwargs)}; it takes shape and reverse")
        target = infer_reshape(self.shape, shape, reverse, "reshape")
        if self._data.flags.c_contiguous and not (autograd._state.recording and self._ag is not None):
            return self._view(self._data.reshape(target))
        return invoke_by_name("Reshape", self, shape=target)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        if self.size == 0:
            return False
        if self.size == 1:
            return bool(self.asscalar())
        raise ValueError(f"the truth value of an NDArray with {self.size} elements is ambiguous; "
                         f"use (a != 0).sum() or similar")

    __hash__ = object.__hash__

    # ---- indexing ---------------------------------------------------------------------

    def __getitem__(self, key: Any) -> NDArray:
        from mxkit.ndarray.indexing import get_item

        return get_item(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        from mxkit.ndarray.indexing import set_item
        from mxkit.ndarray.sparse_base import BaseSparseNDArray

        if isinstance(value, BaseSparseNDArray):  # a sparse value writes its dense values
            value = value.tostype("default")
        set_item(self, key, value)

    # ---- arithmetic -------------------------------------------------------------------

    def _binary(self, other: Any, kind: str, reverse: bool = False, out: Any = None) -> NDArray:
        # the hot path of a + b: operators looked up once, parameters already typed
        ops = _BINARY_OPS.get(kind) or _binary_ops(kind)
        if isinstance(other, NDArray):
            args = [other, self] if reverse else [self, other]
            if self._data.shape == other._data.shape and self._data.dtype == other._data.dtype \
                    and self._ctx is other._ctx:
                if out is None:
                    result = _same_shape_elementwise(ops[0], args, _NO_PARAMS)
                    if _autograd_state.recording:  # (the elementwise kernels ignore training mode)
                        _record_op(ops[0], _NO_PARAMS, args, [result])
                    return result
                if out is self and not reverse and not _autograd_state.recording and _autograd_state.capture is None:
                    return _same_shape_elementwise(ops[0], args, _NO_PARAMS, into=self)  # a -= b
            return invoke(ops[0], args, _NO_PARAMS, out)[0]
        if _is_scalar(other):
            params = {"scalar": float(other)}
            op = ops[2] if reverse else ops[1]
            if out is None:
                result = _same_shape_elementwise(op, [self], params)
                if _autograd_state.recording:
                    _record_op(op, params, [self], [result])
                return result
            if out is self and not _autograd_state.recording and _autograd_state.capture is None:
                return _same_shape_elementwise(op, [self], params, into=self)  # a *= 2
            return invoke(op, [self], params, out)[0]
        if isinstance(other, (np.ndarray, list, tuple)):
            from mxkit.ndarray.creation import array

            return self._binary(array(other, ctx=self._ctx, dtype=self._data.dtype), kind, reverse, out)
        return NotImplemented

    def __add__(self, other: Any) -> NDArray:
        return self._binary(other, "add")

    def __radd__(self, other: Any) -> NDArray:
        return self._binary(other, "add", reverse=True)

    def __iadd__(self, other: Any) -> NDArray:
        return self._binary(other, "add", out=self)

    def __sub__(self, other: Any) -> NDArray:
        return self._binary(other, "sub")

    def __rsub__(self, other: Any) -> NDArray:
        return self._binary(other, "sub", reverse=True)

    def __isub__(self, other: Any) -> NDArray:
        return self._binary(other, "sub", out=self)

    def __mul__(self, other: Any) -> NDArray:
        return self._binary(other, "mul")

    def __rmul__(self, other: Any) -> NDArray:
        return self._binary(other, "mul", reverse=True)

    def __imul__(self, other: Any) -> NDArray:
        return self._binary(other, "mul", out=self)

    def __truediv__(self, other: Any) -> NDArray:
        return self._binary(other, "div")

    def __rtruediv__(self, other: Any) -> NDArray:
        return self._binary(other, "div", reverse=True)

    def __itruediv__(self, other: Any) -> NDArray:
        return self._binary(other, "div", out=self)

    __div__, __rdiv__, __idiv__ = __truediv__, __rtruediv__, __itruediv__

    def __mod__(self, other: Any) -> NDArray:
        return self._binary(other, "mod")

    def __rmod__(self, other: Any) -> NDArray:
        return self._binary(other, "mod", reverse=True)

    def __imod__(self, other: Any) -> NDArray:
        return self._binary(other, "mod", out=self)

    def __pow__(self, other: Any) -> NDArray:
        return self._binary(other, "pow")

    def __rpow__(self, other: Any) -> NDArray:
        return self._binary(other, "pow", reverse=True)

    def __ipow__(self, other: Any) -> NDArray:
        return self._binary(other, "pow", out=self)

    def __eq__(self, other: Any) -> NDArray:  # type: ignore[override]
        return self._binary(other, "eq")

    def __ne__(self, other: Any) -> NDArray:  # type: ignore[override]
        return self._binary(other, "ne")

    def __gt__(self, other: Any) -> NDArray:
        return self._binary(other, "gt")

    def __ge__(self, other: Any) -> NDArray:
        return self._binary(other, "ge")

    def __lt__(self, other: Any) -> NDArray:
        return self._binary(other, "lt")

    def __le__(self, other: Any) -> NDArray:
        return self._binary(other, "le")

    def __neg__(self) -> NDArray:
        return invoke_by_name("negative", self)

    def __pos__(self) -> NDArray:
        return self

    def __abs__(self) -> NDArray:
        return invoke_by_name("abs", self)

    # ---- DLPack -------------------------------------------------------------------------

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule of this array's memory (waits for pending writes; shares the memory)."""
        from mxkit.ndarray.dlpack import export_capsule

        return export_capsule(self, stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        from mxkit.ndarray.dlpack import dlpack_device

        return dlpack_device(self)

    def to_dlpack_for_read(self) -> Any:
        """A DLPack capsule for reading (after pending writes finish)."""
        return self.__dlpack__()

    def to_dlpack_for_write(self) -> Any:
        """A DLPack capsule for writing (after pending reads and writes finish)."""
        self.wait_to_write()
        return self.__dlpack__()


def _op_functions() -> Any:
    global _op_functions
    from mxkit.ndarray import op_functions

    _op_functions = lambda: op_functions  # noqa: E731  (later calls skip the import)
    return op_functions


def _method(op_name: str, doc_name: str):
    def method(self: NDArray, *args: Any, **kwargs: Any) -> Any:
        return _op_functions().call(op_name, (self, *args), kwargs)

    method.__name__ = doc_name
    method.__doc__ = f"Same as ``mx.nd.{op_name}(self, ...)``."
    return method


#: NDArray methods that call the operator of the same (or the given) name with self first
METHOD_OPS = {
    "transpose": "transpose", "swapaxes": "SwapAxis", "flatten": "Flatten", "expand_dims": "expand_dims",
    "squeeze": "squeeze", "tile": "tile", "repeat": "repeat", "flip": "reverse", "split": "SliceChannel",
    "slice": "slice", "slice_axis": "slice_axis", "clip": "clip", "one_hot": "one_hot", "pick": "pick",
    "take": "take", "topk": "topk", "sort": "sort", "argsort": "argsort", "sum": "sum", "mean": "mean",
    "max": "max", "min": "min", "prod": "prod", "nansum": "nansum", "nanprod": "nanprod",
    "argmax": "argmax", "argmin": "argmin", "norm": "norm", "argmax_channel": "argmax_channel",
    "dot": "dot", "broadcast_to": "broadcast_to", "broadcast_like": "broadcast_like",
    "broadcast_axes": "broadcast_axis", "reshape_like": "reshape_like", "zeros_like": "zeros_like",
    "ones_like": "ones_like", "softmax": "softmax", "log_softmax": "log_softmax", "relu": "relu",
    "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "expm1": "expm1", "log": "log", "log10": "log10",
    "log2": "log2", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "rcbrt": "rcbrt",
    "square": "square", "reciprocal": "reciprocal", "abs": "abs", "sign": "sign", "sin": "sin", "cos": "cos",
    "tan": "tan", "arcsin": "arcsin", "arccos": "arccos", "arctan": "arctan", "sinh": "sinh",
    "cosh": "cosh", "arcsinh": "arcsinh", "arccosh": "arccosh", "arctanh": "arctanh", "degrees": "degrees",
    "radians": "radians", "floor": "floor", "ceil": "ceil", "round": "round", "rint": "rint",
    "trunc": "trunc", "fix": "fix", "softrelu": "softrelu", "shuffle": "_shuffle",
    "shape_array": "shape_array", "size_array": "size_array", "slice_like": "slice_like", "diag": "diag",
    "softmin": "softmin", "depth_to_space": "depth_to_space", "space_to_depth": "space_to_depth", "pad": "Pad",
}

for _name, _op in METHOD_OPS.items():
    setattr(NDArray, _name, _method(_op, _name))


# MXNet's flatten, expand_dims and squeeze methods take inplace=True: the result is then a
# reshaped view that shares this array's memory (writes to either show in both).


def _flatten(self: NDArray, inplace: bool = False) -> NDArray:
    """Collapse every axis after the first (MXNet's ``flatten``); ``inplace``: a view."""
    if not inplace:
        return _op_functions().call("Flatten", (self,), {})  # type: ignore[no-any-return]
    return self.reshape((0, -1)) if self.ndim else self.reshape((1, 1))


def _expand_dims(self: NDArray, axis: int, inplace: bool = False) -> NDArray:
    """Insert an axis of length 1 at ``axis``; ``inplace``: a view."""
    if not inplace:
        return _op_functions().call("expand_dims", (self,), {"axis": axis})  # type: ignore[no-any-return]
    ndim = len(self.shape)
    if not -ndim - 1 <= axis <= ndim:
        raise ShapeError(f"expand_dims: axis {axis} is outside [{-ndim - 1}, {ndim}] for shape {self.shape}")
    shape = list(self.shape)
    shape.insert(axis + ndim + 1 if axis < 0 else axis, 1)
    return self.reshape(tuple(shape))


def _squeeze(self: NDArray, axis: int | tuple[int, ...] | None = None, inplace: bool = False) -> NDArray:
    """Remove axes of length 1 (all, or those in ``axis``); ``inplace``: a view."""
    if not inplace:
        return _op_functions().call("squeeze", (self,), {"axis": axis})  # type: ignore[no-any-return]
    ndim = len(self.shape)
    axes = [i for i, n in enumerate(self.shape) if n == 1] if axis is None else (
        [axis] if isinstance(axis, int) else list(axis))
    axes = [a + ndim if a < 0 else a for a in axes]
    for a in axes:
        if not 0 <= a < ndim or self.shape[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of shape {self.shape} is not an axis of length 1")
    shape = tuple(n for i, n in enumerate(self.shape) if i not in axes)
    return self.reshape(shape or (1,))  # as the operator: squeezing every axis leaves (1,)


for _name, _function in (("flatten", _flatten), ("expand_dims", _expand_dims), ("squeeze", _squeeze)):
    _function.__name__ = _name
    setattr(NDArray, _name, _function)


def _split_v2_method(self: NDArray, *args: Any, **kwargs: Any) -> Any:
    """Same as ``mx.nd.split_v2(self, ...)``."""
    from mxkit.ndarray.choosers import split_v2

    return split_v2(self, *args, **kwargs)


NDArray.split_v2 = _split_v2_method  # type: ignore[attr-defined]

__all__ = ["NDArray", "STORAGE_TYPE_STR_TO_ID"]
