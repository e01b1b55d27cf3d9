"""Gluon's ``Parameter``, ``Constant`` and ``ParameterDict`` (MXNet 1.9.1 semantics).

A parameter holds one copy of its value per context, and one gradient buffer per copy.
Its shape may be partly unknown (``0`` in a dimension) until the first forward pass
tells it: ``initialize`` then only records the initializer and the contexts, and the
arrays are made when the shape becomes known (deferred initialisation).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from mxkit.core.dtypes import to_numpy
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.ndarray import STORAGE_TYPE_STR_TO_ID

_GRAD_REQS = ("write", "add", "null")


class GluonError(MXKitError):
    """Gluon was misused: an uninitialised parameter, a wrong name, a bad file..."""


class BlockInputError(GluonError, ValueError):
    """A block was called with inputs it cannot take (mixed NDArrays and Symbols, numbers in a
    hybridized call, inputs on several devices, another argument structure than traced)."""


class StorageTypeError(GluonError, AssertionError):
    """A Parameter's ``stype`` or ``grad_stype`` is not one mxkit provides for parameters. Also an
    ``AssertionError``, the class MXNet 1.9.1 raises there."""


class DeferredInitializationError(GluonError):
    """A parameter's value was asked for before its shape was known (deferred initialisation)."""


def _contexts(ctx: Any) -> list[Any]:
    from mxkit.core.context import Context, current_context

    if ctx is None:
        return [current_context()]
    if isinstance(ctx, Context):
        return [ctx]
    contexts = list(ctx)
    if not contexts or not all(isinstance(c, Context) for c in contexts):
        raise GluonError(f"ctx must be a Context or a non-empty list of Contexts, got {ctx!r}")
    return contexts


def shape_is_known(shape: Sequence[int] | None) -> bool:
    """Whether every dimension of ``shape`` is known (MXNet marks unknown ones with 0)."""
    return shape is not None and all(int(d) > 0 for d in shape)


class Parameter:
    """A weight of a Block.

    Parameters
    ----------
    name : str
        The full name (``dense0_weight``).
    grad_req : {'write', 'add', 'null'}
    shape : tuple of int, optional
        ``0`` marks a dimension inferred at the first forward pass.
    dtype : str or numpy dtype
    lr_mult, wd_mult : float
        Multipliers of the learning rate and the weight decay for this parameter.
    init : Initializer or str, optional
        Overrides the initializer given to :meth:`initialize`.
    allow_deferred_init : bool
        Whether :meth:`initialize` may wait for the shape.
    differentiable : bool
        ``False`` forces ``grad_req='null'`` (running statistics).
    stype : {'default', 'row_sparse'}
        ``'row_sparse'``: the value on each context is a ``RowSparseNDArray`` read by rows
        (:meth:`row_sparse_data`, which pulls them from its Trainer's store), and the store
        holds and trains the whole value, as MXNet's does.
    grad_stype : {'default', 'row_sparse'}
        ``'row_sparse'``: :meth:`grad` holds only the rows a batch touched, and the Trainer's
        optimizer updates only those rows (MXNet's lazy update).
    """

    def __init__(self, name: str, grad_req: str = "write", shape: Any = None, dtype: Any = "float32",
                 lr_mult: float = 1.0, wd_mult: float = 1.0, init: Any = None, allow_deferred_init: bool = False,
                 differentiable: bool = True, stype: str = "default", grad_stype: str = "default") -> None:
        for what, kind in (("stype", stype), ("grad_stype", grad_stype)):
            if kind == "csr":
                raise StorageTypeError(f"Parameter {name!r}: {what}='csr' is not provided for parameters; use "
                                       f"'default' or 'row_sparse'")
            if kind not in ("default", "row_sparse"):
                raise StorageTypeError(f"Parameter {name!r}: {what} must be 'default' or 'row_sparse', "
                                       f"got {kind!r}")
        #: MXNet's storage types. A row-sparse parameter's arrays are RowSparseNDArrays (every row
        #: after initialisation, the rows last pulled after row_sparse_data); its Trainer's store
        #: holds the whole value. A row_sparse grad_stype makes the gradient a row_sparse array
        #: holding the rows a batch touched, which the Trainer's optimizer updates lazily
        self._stype = stype
        self._grad_stype = grad_stype
        self.name = name
        #: the Trainer that updates this parameter (MXNet's link: loading new values resets its store)
        self._trainer: Any = None
        self._shape = None if shape is None else tuple(int(d) for d in ((shape,) if isinstance(shape, int)
                                                                           else shape))
        self.dtype = dtype
        self.lr_mult = float(lr_mult)
        self.wd_mult = float(wd_mult)
        self.init = init
        self._allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        self._data: list[Any] | None = None
        self._grad: list[Any] | None = None
        self._grad_req = "null"
        self.grad_req = grad_req if differentiable else "null"
        self._ctx_list: list[Any] | None = None
        self._deferred_init: tuple | None = None
        #: bumped whenever the arrays are replaced, so bound executors know to rebind
        self.version = 0
        #: (attributes, the Symbol variable made with them): see var()
        self._var_cache: tuple[tuple, Any] | None = None

    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={self.dtype})"

    @property
    def dtype(self) -> np.dtype:
        """The dtype, as a ``numpy.dtype``: it compares equal both to a name (``"float16"``) and
        to a numpy type (``np.float16``), the two forms MXNet code compares it with."""
        if self._dtype_name == "bfloat16":  # ml_dtypes' type, unknown to np.dtype by name
            return to_numpy("bfloat16")
        return np.dtype(self._dtype_name)

    @dtype.setter
    def dtype(self, value: Any) -> None:
        self._dtype_name = "bfloat16" if isinstance(value, str) and value == "bfloat16" else np.dtype(value).name

    # -- attributes -----------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._shape

    @shape.setter
    def shape(self, new_shape: Any) -> None:
        new_shape = tuple(int(d) for d in new_shape)
        if self._shape is not None:
            if len(new_shape) != len(self._shape) or any(
                    0 not in (old, new) and old != new for old, new in zip(self._shape, new_shape)):
                raise ShapeError(f"parameter {self.name!r}: inferred shape {new_shape} is incompatible with its "
                                 f"declared shape {self._shape} (0 marks an unknown dimension)")
            # merge: a dimension known on either side is known (a shared parameter may be
            # declared again by a block that does not know its input size)
            new_shape = tuple(new if new else old for old, new in zip(self._shape, new_shape))
        self._shape = new_shape

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in _GRAD_REQS:
            raise GluonError(f"parameter {self.name!r}: grad_req must be one of {', '.join(_GRAD_REQS)}, got {req!r}")
        if not self._differentiable:
            req = "null"
        if req == self._grad_req:
            return
        self._grad_req = req
        if req == "null":
            self._grad = None
            if self._data is not None:
                self._data = [d.detach() for d in self._data]
                self.version += 1
        elif self._data is not None:
            self._init_grad()

    # -- initialisation ---------------------------------------------------------------------

    def initialize(self, init: Any = None, ctx: Any = None, default_init: Any = None,
                   force_reinit: bool = False) -> None:
        """Make the arrays on ``ctx`` (a Context or a list) and fill them with the initializer.

        The parameter's own ``init`` wins over ``init``, which wins over ``default_init``
        (``Uniform()`` when none is given). With an unknown shape and
        ``allow_deferred_init``, the arrays are made at the first forward pass.
        """
        from mxkit.train import initializer as mx_init

        if default_init is None:
            default_init = mx_init.Uniform()
        if self._data is not None and not force_reinit:
            import warnings

            warnings.warn(f"Parameter {self.name!r} is already initialized, ignoring. Set force_reinit=True to "
                          f"re-initialize.", stacklevel=2)
            return
        self._data = self._grad = None
        contexts = _contexts(ctx)
        # MXNet's rule: the parameter's own init, else the one given, else the default; the
        # default initializer is then called with the chosen one as the variable's __init__
        chosen = init if init is not None else (self.init if self.init is not None else default_init)
        if not shape_is_known(self._shape):
            if self._allow_deferred_init:
                self._deferred_init = (chosen, contexts, default_init, None)
                return
            raise GluonError(f"cannot initialize parameter {self.name!r} because its shape {self._shape} is not "
                             f"fully known; give the shape or let the layer infer it (in_units/in_channels=0)")
        self._deferred_init = (chosen, contexts, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self) -> None:
        from mxkit.ndarray import zeros
        from mxkit.train import initializer as mx_init

        if self._deferred_init is None:
            return
        init, contexts, default_init, data = self._deferred_init
        self._deferred_init = None
        if not shape_is_known(self._shape):
            raise DeferredInitializationError(f"cannot initialize parameter {self.name!r}: its shape {self._shape} "
                                              f"is still unknown")
        owned = data is None
        if owned:
            data = zeros(self._shape, dtype=self.dtype)
            if isinstance(init, _ConstantInit):
                init(self.name, data)
            else:
                mx_init.create(default_init)(mx_init.InitDesc(self.name, {"__init__": init}), data)
        self._init_impl(data, contexts, owned=owned)

    def _init_impl(self, data: Any, contexts: list[Any], owned: bool = False) -> None:
        """Give the parameter ``data`` on every context: copies, except that an array made here for
        the purpose (``owned``) serves its own context itself (a parameter-sized copy less)."""
        self._ctx_list = list(contexts)
        if self._stype == "row_sparse":
            # every row, on every context (MXNet initialises a row_sparse array in full)
            dense = data.tostype("default") if getattr(data, "stype", "default") != "default" else data
            self._data = [dense.copyto(ctx).astype(self.dtype, copy=False).tostype("row_sparse")
                          for ctx in contexts]
        else:
            self._data = [data.astype(self.dtype, copy=False) if owned and ctx == data.context
                          else data.copyto(ctx).astype(self.dtype, copy=False) for ctx in contexts]
        self.version += 1
        self._init_grad()

    def _init_grad(self) -> None:
        from mxkit.ndarray import autograd, zeros

        if self._grad_req == "null" or self._data is None:
            self._grad = None
            return
        if self._grad_stype == "row_sparse":
            from mxkit.ndarray import sparse

            self._grad = [sparse.zeros("row_sparse", d.shape, ctx=d.context, dtype=self.dtype) for d in self._data]
        else:
            self._grad = [zeros(d.shape, ctx=d.context, dtype=self.dtype) for d in self._data]
        autograd.mark_variables(self._data, self._grad, self._grad_req)

    @property
    def stype(self) -> str:
        """The storage type of the value: ``'default'`` or ``'row_sparse'``."""
        return self._stype

    @property
    def grad_stype(self) -> str:
        """The storage type of the gradient: ``'default'`` or ``'row_sparse'``."""
        return self._grad_stype

    def _check_initialized(self, ctx: Any = None) -> list[Any]:
        if self._data is not None:
            return self._data
        if self._deferred_init is not None:
            raise DeferredInitializationError(
                f"parameter {self.name!r} has not been initialized yet because its shape is inferred at the first "
                f"forward pass; run one forward pass (or give in_units/in_channels) before reading it")
        raise GluonError(f"parameter {self.name!r} has not been initialized; call initialize() on it or on the "
                         f"Block's collect_params()")

    def _ctx_index(self, ctx: Any) -> int:
        from mxkit.core.context import current_context

        data = self._check_initialized()
        ctx = current_context() if ctx is None else ctx
        for index, array in enumerate(data):
            if array.context == ctx:
                return index
        if len(data) == 1 and ctx is None:
            return 0
        raise GluonError(f"parameter {self.name!r} was not initialized on {ctx}; it lives on "
                         f"{[str(d.context) for d in data]}")

    # -- access -----------------------------------------------------------------------------

    def _check_dense(self, what: str) -> None:
        if self._stype != "default":
            raise GluonError(f"parameter {self.name!r} has storage type {self._stype!r}: read it with "
                             f"row_sparse_data(row_id) (the rows a batch uses), not {what}()")

    def _arrays(self) -> list[Any]:
        """The arrays on every context, whatever the storage type (for the Trainer)."""
        return list(self._check_initialized())

    def row_sparse_data(self, row_id: Any) -> Any:
        """The rows ``row_id`` of a ``stype='row_sparse'`` parameter on ``row_id``'s context.

        The rows are pulled from the store of the parameter's Trainer (which must exist) into
        the parameter's array on that context, which is returned: a ``RowSparseNDArray`` that
        holds those rows (other rows read as 0) and whose gradient is the parameter's.

        Parameters
        ----------
        row_id : NDArray
            The row ids (any shape; repeats are allowed).
        """
        return self._pull_rows(row_id, [getattr(row_id, "context", None)])[0]

    def list_row_sparse_data(self, row_id: Any) -> list[Any]:
        """:meth:`row_sparse_data` on every context of the parameter, in :meth:`list_ctx` order."""
        return self._pull_rows(row_id, self.list_ctx())

    def _pull_rows(self, row_id: Any, contexts: list[Any]) -> list[Any]:
        from mxkit.ndarray import NDArray

        if self._stype != "row_sparse":
            raise GluonError(f"parameter {self.name!r} has storage type {self._stype!r}: read it with data(), "
                             f"row_sparse_data() is for stype='row_sparse'")
        if not isinstance(row_id, NDArray):
            raise GluonError(f"parameter {self.name!r}: row_id must be an NDArray of row ids, got "
                             f"{type(row_id).__name__}")
        if self._trainer is None:
            raise GluonError(f"cannot read rows of parameter {self.name!r}: no Trainer was created with it (rows "
                             f"are pulled through the Trainer's store); create the gluon.Trainer first")
        self._check_initialized()
        indices = [self._ctx_index(ctx) for ctx in contexts]  # (row_sparse_data: row_id's context)
        for index in indices:
            self._replace_array(index, self._trainer._row_sparse_pull(self, self._data[index].context, row_id))
        return [self._data[index] for index in indices]

    def _replace_array(self, index: int, array: Any) -> None:
        """Make ``array`` the value on context ``index``, a variable whose gradient is the
        parameter's (a loss computed from the rows differentiates the parameter, as MXNet's
        row-sparse weight is)."""
        from mxkit.ndarray import autograd

        self._data[index] = array
        if self._grad is not None:
            autograd.mark_variables([array], [self._grad[index]], self._grad_req)
        self.version += 1

    def data(self, ctx: Any = None) -> Any:
        """The value on ``ctx`` (the current context by default; the only one when there is one)."""
        self._check_dense("data")
        data = self._check_initialized()
        if ctx is None and len(data) == 1:
            return data[0]
        return data[self._ctx_index(ctx)]

    @property
    def is_initialized(self) -> bool:
        """Whether the values exist (False before ``initialize`` and while a deferred shape is unknown)."""
        return self._data is not None

    def list_data(self) -> list[Any]:
        """The values on every context."""
        self._check_dense("list_data")
        return list(self._check_initialized())

    def grad(self, ctx: Any = None) -> Any:
        """The gradient buffer on ``ctx``."""
        data = self._check_initialized()
        if self._grad is None:
            raise GluonError(f"cannot get the gradient of parameter {self.name!r}: its grad_req is 'null'")
        if ctx is None and len(data) == 1:
            return self._grad[0]
        return self._grad[self._ctx_index(ctx)]

    def list_grad(self) -> list[Any]:
        """The gradient buffers on every context."""
        self._check_initialized()
        if self._grad is None:
            raise GluonError(f"cannot get the gradients of parameter {self.name!r}: its grad_req is 'null'")
        return list(self._grad)

    def list_ctx(self) -> list[Any]:
        """The contexts the parameter lives on."""
        if self._data is None:
            if self._deferred_init is not None:
                return list(self._deferred_init[1])
            raise GluonError(f"parameter {self.name!r} has not been initialized")
        return list(self._ctx_list or [])

    def set_data(self, data: Any) -> None:
        """Write ``data`` into every copy (shape must match)."""
        from mxkit.ndarray import NDArray, array

        if not isinstance(data, NDArray):
            data = array(np.asarray(data), dtype=self.dtype)
        self.shape = data.shape
        if self._data is None:
            if self._deferred_init is None:
                raise GluonError(f"parameter {self.name!r} has not been initialized; call initialize() first")
            init, contexts, default_init, _ = self._deferred_init
            self._deferred_init = (init, contexts, default_init, data)
            return
        trainer = self._trainer
        if trainer is not None and trainer._kv_initialized and trainer._update_on_kvstore \
                and self not in trainer._params_to_init:
            # MXNet's rule: the store holds the weights, so it is made anew from the new values
            trainer._reset_kvstore()
        if self._stype == "row_sparse":
            dense = data.tostype("default") if getattr(data, "stype", "default") != "default" else data
            for index, target in enumerate(self._data):
                value = dense.copyto(target.context).astype(self.dtype, copy=False).tostype("row_sparse")
                self._replace_array(index, value)
            return
        for target in self._data:
            target[:] = data.as_in_context(target.context).astype(target.dtype, copy=False)

    def zero_grad(self) -> None:
        """Set the gradient buffers to 0 (a row_sparse gradient then holds no rows)."""
        if self._grad is None:
            return
        if self._grad_stype == "row_sparse":
            from mxkit.ndarray import autograd, sparse

            for grad in self._grad:
                grad[:] = sparse.zeros("row_sparse", grad.shape, ctx=grad.context, dtype=grad.dtype)
            # marking again also clears the dense buffer that backward accumulates into
            # (grad_req='add'), so the next backward starts from zero as the row_sparse form does
            autograd.mark_variables(self._data, self._grad, self._grad_req)
            return
        for grad in self._grad:
            grad[:] = 0

    def reset_ctx(self, ctx: Any) -> None:
        """Move the parameter to other contexts, keeping its value."""
        contexts = _contexts(ctx)
        if self._data is not None:
            # a row_sparse parameter's arrays may hold only the rows last pulled: take them all
            value = self._reduce() if self._stype == "row_sparse" else self._data[0]
            self._init_impl(value, contexts)
        elif self._deferred_init is not None:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, contexts, default_init, data)
        else:
            raise GluonError(f"cannot reset the context of parameter {self.name!r}: it is not initialized")

    def cast(self, dtype: Any) -> None:
        """Change the dtype of the value and its gradient."""
        self.dtype = dtype
        if self._data is None:
            return
        self._data = [d.astype(self.dtype) for d in self._data]
        self.version += 1
        self._init_grad()

    def var(self) -> Any:
        """The Symbol variable that stands for this parameter in a traced graph."""
        from mxkit import symbol

        # one variable per parameter, as MXNet caches it: a graph that uses the parameter several
        # times (an unrolled recurrent cell) must hold one variable, or it could not be bound
        attrs: dict[str, Any] = {"lr_mult": self.lr_mult, "wd_mult": self.wd_mult, "dtype": self._dtype_name}
        if self._stype != "default":
            attrs["attr"] = {"__storage_type__": str(STORAGE_TYPE_STR_TO_ID[self._stype])}
        if shape_is_known(self._shape):
            attrs["shape"] = self._shape
        if self.init is not None and (isinstance(self.init, str) or hasattr(self.init, "dumps")):
            # as MXNet's: a Module bound to the graph initialises the variable with it (__init__)
            attrs["init"] = self.init if isinstance(self.init, str) else self.init.dumps()
        # one variable while its attributes stay (MXNet keeps one): a cell unrolled over several
        # steps, or a block called twice in one graph, must use the same variable, not several of
        # one name, which no executor can bind
        key = tuple((name, str(value)) for name, value in attrs.items())
        cached = self._var_cache
        if cached is None or cached[0] != key:
            cached = self._var_cache = (key, symbol.var(self.name, **attrs))
        return cached[1]

    def _reduce(self) -> Any:
        """The value averaged over the contexts, on cpu (what ``save_parameters`` writes); a
        row_sparse parameter's every row, from its Trainer's store once that holds it (a
        ``RowSparseNDArray``, saved as such, as MXNet saves it)."""
        from mxkit.core.context import cpu

        data = self._check_initialized()
        if self._stype == "row_sparse":
            trainer = self._trainer
            if trainer is not None and trainer._kv_initialized and trainer._kvstore is not None \
                    and self not in trainer._params_to_init:
                from mxkit.ndarray import arange

                return trainer._row_sparse_pull(self, cpu(), arange(0, self._shape[0], ctx=cpu(), dtype="int64"))
            return data[0].copyto(cpu())  # no store yet: the arrays still hold every row
        total = data[0].copyto(cpu())
        for other in data[1:]:
            total = total + other.copyto(cpu())
        return total / len(data) if len(data) > 1 else total

    def _set_trainer(self, trainer: Any) -> None:
        """Link this parameter to the Trainer that updates it (``None`` unlinks it)."""
        if self._stype != "default" and self._trainer is not None and trainer is not None \
                and self._trainer is not trainer:
            raise GluonError(f"parameter {self.name!r} already has a Trainer: a {self._stype} parameter's rows are "
                             f"pulled through exactly one Trainer (as in MXNet); unlink the first with "
                             f"_set_trainer(None) or put the parameter in one Trainer")
        self._trainer = trainer

    def _load_init(self, data: Any, ctx: Any, cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Initialise from a loaded array, checking shape and dtype (MXNet's rules). A Trainer whose
        store holds the weights (update_on_kvstore) forgets the store, so that its next step
        starts from the loaded values rather than the store's."""
        trainer = self._trainer
        if trainer is not None and trainer._kv_initialized and trainer._update_on_kvstore:
            trainer._reset_kvstore()
        if self._shape is not None:
            if len(self._shape) != len(data.shape) or any(
                    s not in (0, d) for s, d in zip(self._shape, data.shape)):
                raise ShapeError(f"failed loading parameter {self.name!r}: its shape is {self._shape}, the "
                                 f"file has {tuple(data.shape)}")
        self._shape = tuple(data.shape)
        saved_dtype = np.dtype(data.dtype).name
        if saved_dtype != self.dtype:
            if not cast_dtype:
                raise GluonError(f"failed loading parameter {self.name!r}: its dtype is {self.dtype}, the file has "
                                 f"{saved_dtype}; pass cast_dtype=True to convert")
            if dtype_source == "saved":
                self.cast(saved_dtype)  # existing arrays (and gradients) take the file's dtype too
            elif dtype_source != "current":
                raise GluonError(f"dtype_source must be 'current' or 'saved', got {dtype_source!r}")
            data = data.astype(self.dtype)
        if self._data is None:
            if self._deferred_init is not None:
                contexts = self._deferred_init[1]
            else:
                contexts = _contexts(ctx) if ctx is not None else None
                if contexts is None:
                    from mxkit.core.context import cpu

                    contexts = [cpu()]
            self._deferred_init = None
            self._init_impl(data, contexts)
        else:
            self.set_data(data)


class Constant(Parameter):
    """A parameter that is never updated (``grad_req='null'``) with a fixed value."""

    def __init__(self, name: str, value: Any) -> None:
        from mxkit.ndarray import NDArray, array

        if not isinstance(value, NDArray):
            value = array(np.asarray(value, dtype=np.float32))
        self.value = value
        super().__init__(name, grad_req="null", shape=value.shape, dtype=np.dtype(value.dtype).name,
                         init=_ConstantInit(value))


class _ConstantInit:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _desc: Any, arr: Any) -> None:
        arr[:] = self.value


class ParameterDict:
    """An ordered name -> :class:`Parameter` map with a prefix for the names it creates.

    Parameters
    ----------
    prefix : str
        Prepended to the names given to :meth:`get`.
    shared : ParameterDict, optional
        Parameters looked up there first (weight sharing).
    """

    def __init__(self, prefix: str = "", shared: ParameterDict | None = None) -> None:
        self._prefix = prefix
        self._params: OrderedDict[str, Parameter] = OrderedDict()
        self._shared = shared

    def __repr__(self) -> str:
        lines = "\n".join(f"  {p!r}" for p in self._params.values())
        return f"{self._prefix} (\n{lines}\n)"

    @property
    def prefix(self) -> str:
        return self._prefix

    def __getitem__(self, key: str) -> Parameter:
        return self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, key: object) -> bool:
        return key in self._params

    def items(self) -> Any:
        return self._params.items()

    def keys(self) -> Any:
        return self._params.keys()

    def values(self) -> Any:
        return self._params.values()

    def _lookup(self, name: str) -> Parameter | None:
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared:
            self._params[name] = self._shared[name]
            return self._params[name]
        return None

    def get(self, name: str, **kwargs: Any) -> Parameter:
        """The parameter ``prefix + name``, created with ``kwargs`` when absent.

        An existing parameter must agree with ``kwargs`` (an unknown dimension may be filled).
        """
        full = self._prefix + name
        param = self._lookup(full)
        if param is None:
            param = Parameter(full, **kwargs)
            self._params[full] = param
            return param
        for key, value in kwargs.items():
            if key == "shape" and value is not None:
                param.shape = value if not isinstance(value, int) else (value,)
            elif key == "dtype":
                if np.dtype(value).name != param.dtype:
                    raise GluonError(f"parameter {full!r} exists with dtype {param.dtype}, asked for {value}")
            elif hasattr(param, key) and key not in ("init",) and getattr(param, key) != value and value is not None:
                raise GluonError(f"parameter {full!r} exists with {key}={getattr(param, key)!r}, asked for {value!r}")
        return param

    def get_constant(self, name: str, value: Any = None) -> Constant:
        """The constant ``prefix + name``, created from ``value`` when absent."""
        full = self._prefix + name
        param = self._lookup(full)
        if param is None:
            if value is None:
                raise GluonError(f"no constant {full!r}; give its value to create it")
            param = Constant(full, value)
            self._params[full] = param
        if not isinstance(param, Constant):
            raise GluonError(f"parameter {full!r} exists and is not a Constant")
        return param

    def update(self, other: ParameterDict) -> None:
        """Add ``other``'s parameters (a name bound to a different parameter is an error)."""
        for key, value in other.items():
            if key in self._params and self._params[key] is not value:
                raise GluonError(f"cannot update ParameterDict with {key!r}: a different parameter has that name")
            self._params[key] = value

    def select(self, select: str | None) -> ParameterDict:
        """The parameters whose name matches the regular expression ``select`` (all when None)."""
        result = ParameterDict(self._prefix)
        pattern = re.compile(select) if select is not None else None
        for key, value in self._params.items():
            if pattern is None or pattern.match(key):
                result._params[key] = value
        return result

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False, force_reinit: bool = False) -> None:
        """Initialise every parameter (see :meth:`Parameter.initialize`)."""
        from mxkit.train import initializer as mx_init

        default = mx_init.Uniform()
        if isinstance(init, str):
            init = mx_init.create(init)
        for param in self.values():
            param.initialize(None, ctx, init if init is not None else default, force_reinit=force_reinit)

    def zero_grad(self) -> None:
        """Set every gradient to 0."""
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx: Any) -> None:
        for param in self.values():
            param.reset_ctx(ctx)

    def setattr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` (``grad_req``, ``lr_mult``...) of every parameter."""
        for param in self.values():
            setattr(param, name, value)

    def cast(self, dtype: Any) -> None:
        for param in self.values():
            param.cast(dtype)

    def list_ctx(self) -> list[Any]:
        contexts: list[Any] = []
        for param in self.values():
            for ctx in param.list_ctx():
                if ctx not in contexts:
                    contexts.append(ctx)
        return contexts

    def save(self, filename: str, strip_prefix: str = "") -> None:
        """Save with full names (the legacy format ``load`` reads), minus ``strip_prefix``."""
        from mxkit.ndarray import save

        arrays = {}
        for param in self.values():
            name = param.name
            if strip_prefix and not name.startswith(strip_prefix):
                raise GluonError(f"prefix {strip_prefix!r} is to be stripped before saving, but parameter {name!r} "
                                 f"does not start with it")
            arrays[name[len(strip_prefix):]] = param._reduce()
        save(filename, arrays)

    def load(self, filename: str, ctx: Any = None, allow_missing: bool = False, ignore_extra: bool = False,
             restore_prefix: str = "", cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Load a file written by :meth:`save` (or MXNet's ``ParameterDict.save``)."""
        from mxkit.ndarray import load

        loaded = load(filename)
        if not isinstance(loaded, dict):
            raise GluonError(f"{filename!r} holds a list of arrays, not named parameters")
        loaded = {restore_prefix + k.split(":", 1)[-1]: v for k, v in loaded.items()}
        if not allow_missing:
            missing = [name for name in self.keys() if name not in loaded]
            if missing:
                raise GluonError(f"parameters {missing} are missing in file {filename!r}, which contains "
                                 f"{sorted(loaded)}; set allow_missing=True to ignore missing parameters")
        for name, value in loaded.items():
            if name not in self._params:
                if not ignore_extra:
                    raise GluonError(f"parameter {name!r} loaded from {filename!r} is not in this ParameterDict "
                                     f"({list(self.keys())}); set ignore_extra=True to ignore it")
                continue
            self._params[name]._load_init(value, ctx, cast_dtype=cast_dtype, dtype_source=dtype_source)
