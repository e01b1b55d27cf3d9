"""Gluon's ``Trainer``: applies an optimizer to a set of parameters, through a KVStore.

As in MXNet 1.9.1, the store is made at the first ``step`` (parameters may be initialised
late): none for one device and a non-distributed type, else ``mx.kv.create(kvstore)``.
Parameter ``i`` of the trainer is key ``i`` of the store. With ``update_on_kvstore`` the
store runs the optimizer: gradients are pushed and the updated weights pulled into every
copy. Without it, gradients are pushed and their sum (over devices, and over workers for a
``dist_*`` store) pulled back, and each device's updater applies the optimizer to its copy.
With no store and several devices the gradients are summed over the devices locally, so the
copies stay equal.

Optimizer states are saved in mxkit's archive format (arrays and a JSON manifest, never a
pickle): the updater's, or the store's when it runs the optimizer.
"""

from __future__ import annotations

import os
from math import prod
from typing import Any

from mxkit.gluon.parameter import GluonError, Parameter, ParameterDict

# a 'local' store stops running the optimizer past this many elements in one array (MXNet's
# rule: one CPU update per key becomes the bottleneck)
_LOCAL_UPDATE_LIMIT = 1024 * 1024 * 16


def _default_update_on_kvstore() -> bool:
    from mxkit.core import config

    value, source = config.resolve("update_on_kvstore")
    if source == "default" and "MXNET_UPDATE_ON_KVSTORE" in os.environ:
        raw = os.environ["MXNET_UPDATE_ON_KVSTORE"]  # MXNet's name, for scripts written for it
        if raw not in ("0", "1"):
            raise GluonError(f"MXNET_UPDATE_ON_KVSTORE must be 0 or 1, got {raw!r}")
        return raw == "1"
    return bool(value)


def _is_kvstore(value: Any) -> bool:
    return all(callable(getattr(value, attr, None)) for attr in ("init", "push", "pull"))


def _dense(array: Any) -> Any:
    return array.tostype("default") if getattr(array, "stype", "default") != "default" else array


class SparseWeightStoreError(GluonError, ValueError):
    """Row-sparse parameters were given a Trainer without a store, or one whose store does not
    run the optimizer. Also a ``ValueError``, the class MXNet 1.9.1 raises there."""


class StoreCapabilityError(GluonError, ValueError):
    """``update_on_kvstore=True`` with a store that cannot run an optimizer. Also a
    ``ValueError``, the class MXNet 1.9.1 raises there."""


class TrainerStateError(GluonError, AssertionError):
    """A Trainer method was called in a state where it does not apply (``update`` while the store
    runs the optimizer). Also an ``AssertionError``, the class MXNet 1.9.1 raises there."""


class Trainer:
    """Apply ``optimizer`` to ``params``.

    Parameters
    ----------
    params : ParameterDict, dict or list of Parameter
    optimizer : str or Optimizer
    optimizer_params : dict, optional
        Arguments of the optimizer (``learning_rate``, ``momentum``, ``wd``...).
    kvstore : str, KVStore or None
        ``'device'``/``'local'`` reduce gradients across this machine's devices (no store is
        made for one device); ``'dist_sync'``/``'dist_async'``/``'dist_ssp'`` (or a store made
        by ``mx.kv.create``) across workers too; None sums over devices locally.
    compression_params : dict, optional
        Gradient compression of the store (``{'type': '2bit', 'threshold': 0.5}``).
    update_on_kvstore : bool, optional
        Whether the store runs the optimizer (default: config ``update_on_kvstore``, forced on
        for ``dist_async``).
    """

    def __init__(self, params: Any, optimizer: Any, optimizer_params: dict | None = None, kvstore: Any = "device",
                 compression_params: dict | None = None, update_on_kvstore: bool | None = None) -> None:
        if isinstance(params, dict | ParameterDict):
            params = [params[key] for key in sorted(params.keys())]
        if not isinstance(params, list | tuple):
            raise GluonError(f"Trainer takes a ParameterDict, a dict or a list of Parameters, got "
                             f"{type(params).__name__}")
        self._params: list[Parameter] = []
        self._param2idx: dict[str, int] = {}
        for index, param in enumerate(params):
            if not isinstance(param, Parameter):
                raise GluonError(f"Trainer's params must be Parameters; item {index} is {type(param).__name__}")
            self._param2idx[param.name] = index
            self._params.append(param)
            param._set_trainer(self)
        if kvstore is not None and not isinstance(kvstore, str) and not _is_kvstore(kvstore):
            raise GluonError(f"Trainer(kvstore=...) takes a store type ('device', 'local', 'dist_sync'...), a store "
                             f"made by mx.kv.create, or None; got {type(kvstore).__name__}")
        if update_on_kvstore not in (None, True, False):
            raise GluonError(f"update_on_kvstore must be None, True or False, got {update_on_kvstore!r}")
        if compression_params is not None and not isinstance(compression_params, dict):
            raise GluonError(f"compression_params must be a dict such as {{'type': '2bit', 'threshold': 0.5}}, got "
                             f"{type(compression_params).__name__}")
        self._compression_params = compression_params
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._init_optimizer(optimizer, optimizer_params or {})
        self._scale = self._optimizer.rescale_grad
        self._kv_initialized = False
        self._kvstore: Any = None
        self._update_on_kvstore: bool | None = None
        self._distributed = False
        self._params_to_init: list[Parameter] = list(self._params)

    def _init_optimizer(self, optimizer: Any, optimizer_params: dict) -> None:
        from mxkit.train import optimizer as opt

        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise GluonError("optimizer_params must be None when optimizer is an Optimizer instance")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._updaters: dict[str, Any] = {}

    def _updater_for(self, ctx: Any) -> Any:
        from mxkit.train import optimizer as opt

        key = str(ctx)
        if key not in self._updaters:
            self._updaters[key] = opt.get_updater(self._optimizer)
        return self._updaters[key]

    # -- the store --------------------------------------------------------------------------

    def _contexts(self) -> list[Any]:
        contexts: list[Any] = []
        for param in self._params:
            try:
                found = param.list_ctx()
            except GluonError:
                continue  # not initialised at all: initialize() will fail clearly on use
            for ctx in found:
                if ctx not in contexts:
                    contexts.append(ctx)
        return contexts

    def _init_kvstore(self) -> None:
        kind = self._kvstore_params["kvstore"]
        explicit = self._kvstore_params["update_on_kvstore"]
        update_on_kvstore = _default_update_on_kvstore()
        contexts = self._contexts()
        sparse_weights = [p.name for p in self._params if p.stype == "row_sparse"]
        if sparse_weights:
            # MXNet's rule: row-sparse weights live in a store (even for one device), which runs
            # the optimizer; their rows are read through it (row_sparse_data)
            if explicit is False:
                raise SparseWeightStoreError(f"Trainer(update_on_kvstore=False) cannot train the row_sparse "
                                             f"parameters {sparse_weights}: their updates run in the store; set "
                                             f"update_on_kvstore=None or True")
            if kind is None:
                raise SparseWeightStoreError(f"Trainer(kvstore=None) cannot train the row_sparse parameters "
                                             f"{sparse_weights}: they need a store; use kvstore='device' or 'local'")
            explicit = True
        if kind is None:
            kv = None
        elif isinstance(kind, str):
            if len(contexts) <= 1 and "dist" not in kind and not sparse_weights:
                kv = None  # one device on one machine: the updater runs in place
            else:
                import mxkit.kvstore as kvs

                kv = kvs.create(kind)
                if kind == "local":
                    sizes = [prod(p.shape) for p in self._params if p.shape and all(d > 0 for d in p.shape)]
                    if sizes and max(sizes) > _LOCAL_UPDATE_LIMIT:
                        update_on_kvstore = False
        else:
            kv = kind
        self._distributed = kv is not None and "dist" in str(kv.type)
        if kv is not None:
            if self._distributed and "async" in str(kv.type):
                if explicit is False:
                    raise GluonError("Trainer(update_on_kvstore=False) cannot train with an asynchronous store: "
                                     "the servers must run the optimizer; set update_on_kvstore=True or None")
                update_on_kvstore = True
            if any(p.grad_stype == "row_sparse" for p in self._params) and not self._distributed:
                # MXNet's default for row-sparse gradients on one machine: each device's updater
                # applies them, lazily
                update_on_kvstore = False
            if explicit is not None:
                update_on_kvstore = explicit
            capable = getattr(kv, "is_capable", None)
            if update_on_kvstore and capable is not None and not capable("optimizer"):
                if explicit:
                    raise StoreCapabilityError(f"Trainer(update_on_kvstore=True): the store {kv.type!r} cannot "
                                               f"run an optimizer; set update_on_kvstore=False")
                update_on_kvstore = False
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(self._optimizer)
            self._kvstore, self._update_on_kvstore = kv, bool(update_on_kvstore)
        else:
            if explicit:
                raise GluonError("Trainer(update_on_kvstore=True) needs a store, but none is used (kvstore=None, or "
                                 "one device with a non-distributed type); set update_on_kvstore=None or False")
            if self._compression_params:
                raise GluonError("Trainer(compression_params=...) needs a store, but none is used (kvstore=None, or "
                                 "one device with a non-distributed type)")
            self._kvstore, self._update_on_kvstore = None, None
        self._kv_initialized = True

    def _reset_kvstore(self) -> None:
        """Forget the store, so that the next step makes it anew from the parameters' current
        values (after they were loaded from a file while the store held the weights)."""
        if self._kvstore is not None and "dist" in str(self._kvstore.type):
            raise GluonError("a distributed KVStore cannot be reset: its servers hold the weights; load the "
                             "parameters before the first step instead")
        if self._kvstore is not None:
            # the new store starts from the parameters' arrays: a row_sparse parameter's hold only
            # the rows last pulled, so they take every row from the old store first
            for param in self._params:
                if param.stype == "row_sparse" and param.is_initialized and param not in self._params_to_init:
                    from mxkit.ndarray import arange

                    param.list_row_sparse_data(arange(0, param.shape[0], dtype="int64"))
        self._kv_initialized = False
        self._kvstore = None
        self._distributed = False
        self._update_on_kvstore = None
        self._params_to_init = list(self._params)

    def _init_params(self) -> None:
        """Seed the store with the parameters initialised since the last call (every worker
        starts from worker 0's values)."""
        waiting = []
        for param in self._params_to_init:
            if not param.is_initialized:
                waiting.append(param)  # deferred: its shape is known after the first forward pass
                continue
            if self._kvstore is not None:
                index = self._param2idx[param.name]
                arrays = param._arrays()
                if param.stype == "row_sparse":
                    # the store holds the whole value; devices pull the rows they use
                    self._kvstore.init(index, arrays[0])
                else:
                    self._kvstore.broadcast(index, arrays[0], out=arrays, priority=-index)
        self._params_to_init = waiting

    def _row_sparse_pull(self, param: Parameter, ctx: Any, row_id: Any) -> Any:
        """The rows ``row_id`` of row_sparse ``param`` from the store, as a new row-sparse array
        on ``ctx`` (the store and its values are made first if need be)."""
        from mxkit.ndarray import sparse

        self._ready()
        if self._kvstore is None:  # pragma: no cover - _init_kvstore refuses row_sparse weights without one
            raise SparseWeightStoreError(f"parameter {param.name!r}: its rows are pulled from a store, and the "
                                         f"Trainer has none")
        index = self._param2idx[param.name]
        out = sparse.zeros("row_sparse", param.shape, ctx=ctx, dtype=param.dtype)
        self._kvstore.row_sparse_pull(index, out=out, row_ids=row_id.as_in_context(ctx), priority=-index)
        return out

    def _ready(self) -> None:
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()

    # -- the public API ---------------------------------------------------------------------

    @property
    def optimizer(self) -> Any:
        """The optimizer (its learning rate, counters...)."""
        return self._optimizer

    @property
    def learning_rate(self) -> float:
        """The optimizer's current learning rate."""
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of the optimizer."""
        self._optimizer.set_learning_rate(lr)

    def _rescale(self, batch_size: Any) -> None:
        if not isinstance(batch_size, int | float) or batch_size <= 0:
            raise GluonError(f"Trainer.step: batch_size must be positive, got {batch_size!r}")
        scale = self._scale / batch_size
        if self._update_on_kvstore and self._distributed and self._kv_initialized \
                and self._optimizer.rescale_grad != scale:
            raise GluonError(f"Trainer.step: the batch size changed to {batch_size}, but the servers' optimizer "
                             f"keeps the gradient scale of the first step ({self._optimizer.rescale_grad}); with a "
                             f"distributed store and update_on_kvstore=True keep the batch size fixed")
        self._optimizer.rescale_grad = scale

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """One update: gradients are divided by ``batch_size``, reduced across devices (and
        workers) and applied."""
        self._rescale(batch_size)
        self._ready()
        self._allreduce_grads()
        self._update()

    def allreduce_grads(self) -> None:
        """Sum each parameter's gradients over its devices (and workers), writing the sum into
        each gradient; for use with :meth:`update` (gradient clipping between the two)."""
        self._ready()
        if self._kvstore is not None and self._update_on_kvstore:
            raise TrainerStateError("allreduce_grads() is not available when the store runs the optimizer; create "
                                    "the Trainer with update_on_kvstore=False")
        self._allreduce_grads()

    def _allreduce_grads(self) -> None:
        for index, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            grads = param.list_grad()
            if self._kvstore is not None and param.grad_stype == "row_sparse":
                self._reduce_row_sparse(index, param, grads)
            elif self._kvstore is not None:
                if self._update_on_kvstore and param.stype == "row_sparse":
                    # the store updates the weights; devices pull the rows they use next
                    self._kvstore.push(index, grads, priority=-index)
                elif self._update_on_kvstore:
                    self._kvstore.pushpull(index, grads, out=param._arrays(), priority=-index)
                else:
                    self._kvstore.pushpull(index, grads, priority=-index)
            elif len(grads) > 1:
                # summed in dense form: a row_sparse gradient's sum holds the rows any device touched
                total = _dense(grads[0]).copy()
                for other in grads[1:]:
                    total += _dense(other).as_in_context(total.context)
                for grad in grads:
                    grad[:] = total.as_in_context(grad.context)

    def _reduce_row_sparse(self, index: int, param: Parameter, grads: list[Any]) -> None:
        """Reduce row_sparse gradients through the store: the store sums their dense values
        (push), then either its optimizer updates the weights, or the sum comes back and each
        gradient takes it in row_sparse form (the rows any device touched), so that each
        device's updater stays lazy."""
        from mxkit.ndarray import zeros

        self._kvstore.push(index, grads, priority=-index)
        if self._update_on_kvstore:
            if param.stype == "default":  # a row_sparse weight's rows are pulled when read
                self._kvstore.pull(index, out=param._arrays(), priority=-index)
            return
        sums = [zeros(g.shape, ctx=g.context, dtype=g.dtype) for g in grads]
        self._kvstore.pull(index, out=sums, priority=-index)
        for grad, total in zip(grads, sums):
            grad[:] = total

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Apply the optimizer to gradients already reduced by :meth:`allreduce_grads`."""
        self._ready()
        if self._kvstore is not None and self._update_on_kvstore:
            raise TrainerStateError("update() is not available when the store runs the optimizer; create the "
                                    "Trainer with update_on_kvstore=False")
        self._rescale(batch_size)
        self._update()

    def _update(self) -> None:
        if self._kvstore is not None and self._update_on_kvstore:
            return  # the store applied the optimizer when the gradients were pushed
        per_ctx: dict[str, list[tuple[int, Any, Any]]] = {}
        for index, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            for weight, grad in zip(param._arrays(), param.list_grad()):
                per_ctx.setdefault(str(weight.context), []).append((index, grad, weight))
        for triples in per_ctx.values():
            updater = self._updater_for(triples[0][2].context)
            indices, grads, weights = zip(*triples)
            updater(list(indices), list(grads), list(weights))

    def save_states(self, fname: str) -> None:
        """Save the optimizer's states (momenta...) and update counts to ``fname`` (an archive of
        arrays and a JSON manifest, not a pickle)."""
        self._ready()
        if self._update_on_kvstore:
            if self._params_to_init:
                raise GluonError("Trainer.save_states: some parameters are not initialised in the store yet; run a "
                                 "step first")
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
            return
        if not self._updaters:
            raise GluonError("Trainer.save_states: no step has run yet, so there are no states to save")
        updater = next(iter(self._updaters.values()))
        with open(fname, "wb") as f:
            f.write(updater.get_states(dump_optimizer=True))

    def load_states(self, fname: str) -> None:
        """Load states written by :meth:`save_states` (the optimizer's counters too).

        Raises
        ------
        FormatError
            When ``fname`` is not such a file (MXNet's pickled states are refused: unpickling
            can run code).
        """
        self._ready()
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            return
        from mxkit.train import optimizer as opt

        with open(fname, "rb") as f:
            states = f.read()
        contexts = {str(ctx) for ctx in self._contexts()} or {"cpu(0)"}
        for key in contexts:
            updater = opt.get_updater(self._optimizer)
            updater.set_states(states)
            self._updaters[key] = updater
        self._optimizer = next(iter(self._updaters.values())).optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))
        for updater in self._updaters.values():
            updater.optimizer = self._optimizer
        # _scale stays: the saved rescale_grad already has a batch size divided in
