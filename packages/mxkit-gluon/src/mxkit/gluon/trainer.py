"""Gluon's ``Trainer``: applies an optimizer to a set of parameters.

Gradients of a parameter that lives on several contexts are summed across them first
(what MXNet's ``device``/``local`` KVStore does for one machine), then each copy is
updated by its context's updater, so the copies stay equal.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.parameter import GluonError, Parameter, ParameterDict


class Trainer:
    """Apply ``optimizer`` to ``params``.

    Parameters
    ----------
    params : ParameterDict, dict or list of Parameter
    optimizer : str or Optimizer
    optimizer_params : dict, optional
        Arguments of the optimizer (``learning_rate``, ``momentum``, ``wd``...).
    kvstore : str or None
        ``'device'``/``'local'`` (or None): gradients are reduced across this machine's
        contexts. Distributed stores are not supported by Trainer yet.
    update_on_kvstore : bool or None
        Only ``None``/``False`` (each context updates its own copy).
    """

    def __init__(self, params: Any, optimizer: Any, optimizer_params: dict | None = None, kvstore: Any = "device",
                 compression_params: Any = None, update_on_kvstore: bool | None = None) -> None:
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
        kind = kvstore if isinstance(kvstore, str) else getattr(kvstore, "type", "")
        if isinstance(kind, str) and kind.startswith("dist"):
            raise GluonError(f"Trainer(kvstore={kind!r}): distributed training through Trainer is not supported "
                             f"yet; use 'device' or 'local'")
        if update_on_kvstore:
            raise GluonError("Trainer(update_on_kvstore=True) is not supported; each context updates its own copy")
        if compression_params is not None:
            raise GluonError("Trainer(compression_params=...) needs a distributed KVStore, which Trainer does not "
                             "support yet")
        self._kvstore = kvstore
        self._init_optimizer(optimizer, optimizer_params or {})
        self._scale = self._optimizer.rescale_grad

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

    @property
    def optimizer(self) -> Any:
        return self._optimizer

    @property
    def learning_rate(self) -> float:
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of the optimizer."""
        self._optimizer.set_learning_rate(lr)

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """One update: gradients are divided by ``batch_size``, reduced across contexts and applied."""
        if batch_size <= 0:
            raise GluonError(f"Trainer.step: batch_size must be positive, got {batch_size}")
        self._optimizer.rescale_grad = self._scale / batch_size
        self.allreduce_grads()
        self.update(batch_size, ignore_stale_grad)

    def allreduce_grads(self) -> None:
        """Sum each parameter's gradients over its contexts and write the sum back to each."""
        for param in self._params:
            if param.grad_req == "null":
                continue
            grads = param.list_grad()
            if len(grads) < 2:
                continue
            total = grads[0].copy()
            for other in grads[1:]:
                total += other.as_in_context(total.context)
            for grad in grads:
                grad[:] = total.as_in_context(grad.context)

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Apply the optimizer (call after :meth:`allreduce_grads`)."""
        self._optimizer.rescale_grad = self._scale / batch_size
        per_ctx: dict[str, list[tuple[int, Any, Any]]] = {}
        for index, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            for weight, grad in zip(param.list_data(), param.list_grad()):
                per_ctx.setdefault(str(weight.context), []).append((index, grad, weight))
        for triples in per_ctx.values():
            updater = self._updater_for(triples[0][2].context)
            indices, grads, weights = zip(*triples)
            updater(list(indices), list(grads), list(weights))

    def save_states(self, fname: str) -> None:
        """Save the optimizer's states (momenta...) and update counts to ``fname``."""
        if not self._updaters:
            raise GluonError("Trainer.save_states: no step has run yet, so there are no states to save")
        updater = next(iter(self._updaters.values()))
        with open(fname, "wb") as f:
            f.write(updater.get_states(dump_optimizer=True))

    def load_states(self, fname: str) -> None:
        """Load states written by :meth:`save_states` (the optimizer is restored too)."""
        with open(fname, "rb") as f:
            states = f.read()
        contexts = {str(ctx) for p in self._params for ctx in p.list_ctx()} or {"cpu(0)"}
        for key in contexts:
            from mxkit.train import optimizer as opt

            updater = opt.get_updater(self._optimizer)
            updater.set_states(states)
            self._updaters[key] = updater
        self._optimizer = next(iter(self._updaters.values())).optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))
        for updater in self._updaters.values():
            updater.optimizer = self._optimizer
        # _scale stays: the saved rescale_grad already has a batch size divided in
