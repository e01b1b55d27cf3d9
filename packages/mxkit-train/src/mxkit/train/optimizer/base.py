"""The :class:`Optimizer` base class, its registry and its JSON description.

The base class is MXNet 1.x's: the same constructor arguments, per-parameter learning-rate
and weight-decay multipliers (weight decay only on ``*_weight`` and ``*_gamma`` once
parameter names are known; ``__lr_mult__``/``__wd_mult__`` symbol attributes), and the
same update counting (``num_update`` is the largest number of updates of any one weight,
counted per device).

An optimizer is also a plain description: :meth:`Optimizer.dumps` writes its registry
name and constructor arguments as JSON, and ``create(**json.loads(text))`` rebuilds it,
so a parameter server can recreate the optimizer without unpickling anything.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from mxkit.ndarray.invoke import invoke
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.sparse_base import BaseSparseNDArray
from mxkit.train._registry import NameRegistry, TrainingValueError, check_number


class SchedulerConflictError(TrainingValueError, UserWarning):
    """The learning rate was set on an optimizer whose lr_scheduler owns it.

    MXNet raises ``UserWarning`` here, so code written for it may catch that; this error
    is both that and a :class:`TrainingValueError`.
    """


_OPTIMIZERS = NameRegistry("optimizer")


def _pairs_to_dict(value: Any, what: str) -> dict:
    """A dict from a dict or from ``[[key, value], ...]`` (how JSON descriptions keep int keys)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        return {key: val for key, val in value}
    raise TrainingValueError(f"{what} must be a dict (or a list of [key, value] pairs), got "
                             f"{type(value).__name__} {value!r}")


def _dict_to_pairs(mapping: Mapping) -> list[list[Any]]:
    return [[key, value] for key, value in mapping.items()]


class Optimizer:
    """The base class of every optimizer (MXNet 1.x's ``mx.optimizer.Optimizer``).

    Parameters
    ----------
    rescale_grad : float, default 1.0
        Multiply the gradient by this before updating (often ``1 / batch_size``).
    param_idx2name : dict of int to str, optional
        Parameter names by index; names not ending in ``_weight`` or ``_gamma`` get no
        weight decay.
    wd : float, default 0.0
        Weight decay (L2 penalty) coefficient.
    clip_gradient : float, optional
        Clip the rescaled gradient to ``[-clip_gradient, clip_gradient]``.
    learning_rate : float, optional
        The learning rate; 0.01 when neither it nor ``lr_scheduler`` is given. Given with
        a scheduler, it overrides the scheduler's ``base_lr``.
    lr_scheduler : LRScheduler or dict, optional
        The learning-rate schedule (a dict is a scheduler description, see
        :func:`mxkit.train.lr_scheduler.create`).
    sym : Symbol, optional
        The network, whose ``__lr_mult__``/``__wd_mult__`` attributes set multipliers.
    begin_num_update : int, default 0
        The update count to start from (when resuming).
    multi_precision : bool, default False
        Keep a float32 master copy of float16 weights and update that.
    param_dict : dict of int to Parameter, optional
        Objects with ``lr_mult``/``wd_mult`` attributes by index (take precedence).
    lr_mult, wd_mult : dict, optional
        Multipliers by index or name, as :meth:`set_lr_mult`/:meth:`set_wd_mult` (mxkit
        extension, used by :meth:`dumps` descriptions).
    """

    #: MXNet's registry dict (name -> class); a :class:`NameRegistry` here
    opt_registry = _OPTIMIZERS
    #: numeric attributes that change during training besides the update counts (Nadam's
    #: momentum schedule...), saved with ``Updater.get_states(dump_optimizer=True)``
    runtime_attributes: tuple[str, ...] = ()

    def __init__(self, rescale_grad: float = 1.0, param_idx2name: Any = None, wd: float = 0.0,
                 clip_gradient: float | None = None, learning_rate: float | None = None, lr_scheduler: Any = None,
                 sym: Any = None, begin_num_update: int = 0, multi_precision: bool = False,
                 param_dict: Any = None, lr_mult: Any = None, wd_mult: Any = None) -> None:
        owner = type(self).__name__
        self.rescale_grad = check_number(owner, "rescale_grad", rescale_grad)
        self.wd = check_number(owner, "wd", wd)
        self.clip_gradient = check_number(owner, "clip_gradient", clip_gradient, low=0.0, allow_none=True)
        if isinstance(lr_scheduler, Mapping):
            from mxkit.train.lr_scheduler import create as create_scheduler

            lr_scheduler = create_scheduler(**lr_scheduler)
        if lr_scheduler is not None and not callable(lr_scheduler):
            raise TrainingValueError(f"{owner}: lr_scheduler must be an LRScheduler (callable on num_update) or a "
                                     f"scheduler description dict, got {lr_scheduler!r}")
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        check_number(owner, "learning_rate", learning_rate, allow_none=True)
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None and \
                getattr(lr_scheduler, "base_lr", learning_rate) != learning_rate:
            warnings.warn("learning rate from ``lr_scheduler`` has been overwritten by ``learning_rate`` in "
                          "optimizer.", UserWarning, stacklevel=2)
            lr_scheduler.base_lr = learning_rate
        if isinstance(begin_num_update, bool) or not isinstance(begin_num_update, (int, np.integer)) \
                or begin_num_update < 0:
            raise TrainingValueError(f"{owner}: begin_num_update must be a non-negative int, got "
                                     f"{begin_num_update!r}")
        self.begin_num_update = int(begin_num_update)
        self.num_update = int(begin_num_update)
        self._all_index_update_counts: dict[int, dict[Any, int]] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.multi_precision = bool(multi_precision)
        self.aggregate_num = 0
        self.idx2name = _pairs_to_dict(param_idx2name, f"{owner}: param_idx2name")
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult(_pairs_to_dict(lr_mult, f"{owner}: lr_mult"))
        self.set_wd_mult(_pairs_to_dict(wd_mult, f"{owner}: wd_mult"))

    # ---- registry --------------------------------------------------------------------

    @staticmethod
    def register(klass: type) -> type:
        """Register an optimizer class under its lower-cased name (a class decorator)."""
        if not (isinstance(klass, type) and issubclass(klass, Optimizer)):
            raise TrainingValueError(f"only subclasses of Optimizer can be registered as optimizers, got {klass!r}")
        return _OPTIMIZERS.register(klass)

    @staticmethod
    def create_optimizer(name: str, **kwargs: Any) -> Optimizer:
        """An optimizer of registered name ``name`` (case-insensitive) built with ``kwargs``.

        Raises
        ------
        UnknownNameError
            For an unknown name, listing the registered ones.
        """
        return _OPTIMIZERS.lookup(name)(**kwargs)

    # ---- learning rate and multipliers ------------------------------------------------

    @property
    def learning_rate(self) -> float:
        """The current learning rate (the scheduler's at ``num_update`` if there is one)."""
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate (only without a scheduler, as in MXNet).

        Raises
        ------
        SchedulerConflictError
            With a scheduler; it is also a ``UserWarning``, which MXNet raises here.
        """
        if self.lr_scheduler is not None:
            raise SchedulerConflictError("set_learning_rate cannot change the learning rate of an optimizer with an "
                                     "lr_scheduler; change the scheduler's base_lr instead")
        self.lr = check_number(type(self).__name__, "learning_rate", lr)

    def set_lr_scale(self, args_lrscale: Any) -> None:
        """Deprecated in MXNet; use :meth:`set_lr_mult`."""
        raise TrainingValueError("set_lr_scale was removed in MXNet 1.x; use set_lr_mult({name: mult})")

    def set_lr_mult(self, args_lr_mult: Mapping) -> None:
        """Set learning-rate multipliers by parameter name or index.

        Symbol attributes ``__lr_mult__`` (from ``sym``) come first; ``args_lr_mult``
        overrides them.
        """
        self.lr_mult: dict[Any, float] = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: Mapping) -> None:
        """Set weight-decay multipliers by parameter name or index.

        Parameters named in ``param_idx2name`` that do not end in ``_weight`` or
        ``_gamma`` get 0 (biases, BatchNorm's beta are not decayed); then symbol
        attributes ``__wd_mult__``; then ``args_wd_mult``.
        """
        self.wd_mult: dict[Any, float] = {}
        for name in self.idx2name.values():
            if not (name.endswith("_weight") or name.endswith("_gamma")):
                self.wd_mult[name] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id: int) -> None:
        """Count updates separately per device (each device updates its own copy)."""
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index: Any) -> None:
        indices = index if isinstance(index, (list, tuple)) else [index]
        counts = self._index_update_count
        for idx in indices:
            counts[idx] = counts.get(idx, self.begin_num_update) + 1
            if counts[idx] > self.num_update:
                self.num_update = counts[idx]

    def _get_lrs(self, indices: Iterable[Any]) -> list[float]:
        indices = list(indices)
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        lrs = [lr] * len(indices)
        for i, index in enumerate(indices):
            if index in self.param_dict:
                lrs[i] *= self.param_dict[index].lr_mult
            elif index in self.lr_mult:
                lrs[i] *= self.lr_mult[index]
            elif index in self.idx2name:
                lrs[i] *= self.lr_mult.get(self.idx2name[index], 1.0)
        return lrs

    def _get_lr(self, index: Any) -> float:
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: Iterable[Any]) -> list[float]:
        indices = list(indices)
        wds = [self.wd] * len(indices)
        for i, index in enumerate(indices):
            if index in self.param_dict:
                wds[i] *= self.param_dict[index].wd_mult
            elif index in self.wd_mult:
                wds[i] *= self.wd_mult[index]
            elif index in self.idx2name:
                wds[i] *= self.wd_mult.get(self.idx2name[index], 1.0)
        return wds

    def _get_wd(self, index: Any) -> float:
        return self._get_wds([index])[0]

    # ---- states and updates ------------------------------------------------------------

    def create_state(self, index: Any, weight: Any) -> Any:
        """The auxiliary state of one weight (momentum...), ``None`` when there is none."""
        return None

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """:meth:`create_state`, plus a float32 master copy of a float16 weight when
        ``multi_precision`` is on: ``(master, state)``."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (master, self.create_state(index, master))
        if weight.dtype == np.float16:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or slow convergence. "
                          "Consider using multi_precision=True option of the optimizer", stacklevel=2)
        return self.create_state(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad`` and ``state`` (which it also updates)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement update()")

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """:meth:`update`, through the float32 master copy for float16 weights when
        ``multi_precision`` is on."""
        if self.multi_precision and weight.dtype == np.float16:
            master, original_state = state
            self.update(index, master, grad.astype(np.float32), original_state)
            cast_to(master, weight)
        else:
            self.update(index, weight, grad, state)

    def _check_arrays(self, weight: Any, grad: Any) -> None:
        arrays = (NDArray, BaseSparseNDArray)
        if not isinstance(weight, arrays) or not isinstance(grad, arrays):
            raise TrainingValueError(f"{type(self).__name__}.update needs NDArrays for weight and grad, got "
                                     f"{type(weight).__name__} and {type(grad).__name__}")

    def _common_params(self, lr: float, wd: float) -> dict[str, Any]:
        clip = self.clip_gradient
        return {"lr": float(lr), "wd": float(wd), "rescale_grad": float(self.rescale_grad),
                "clip_gradient": float(clip) if clip else -1.0}

    # ---- description -------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        """Constructor arguments that rebuild this optimizer (JSON-able); subclasses add theirs."""
        config: dict[str, Any] = {
            "rescale_grad": self.rescale_grad, "wd": self.wd, "clip_gradient": self.clip_gradient,
            "learning_rate": self.lr, "begin_num_update": self.begin_num_update,
            "multi_precision": self.multi_precision,
        }
        if self.idx2name:
            config["param_idx2name"] = _dict_to_pairs(self.idx2name)
        if self.lr_mult:
            config["lr_mult"] = _dict_to_pairs(self.lr_mult)
        if self.wd_mult:
            config["wd_mult"] = _dict_to_pairs(self.wd_mult)
        if self.lr_scheduler is not None:
            describe = getattr(self.lr_scheduler, "describe", None)
            if describe is None:
                raise TrainingValueError(f"the lr_scheduler {self.lr_scheduler!r} cannot be described as JSON; "
                                         f"use an LRScheduler from mxkit.train.lr_scheduler")
            config["lr_scheduler"] = describe()
        return config

    def describe(self) -> dict[str, Any]:
        """``{"name": <registry name>, <constructor argument>: value, ...}``, JSON-able.

        ``mx.optimizer.create(**optimizer.describe())`` builds an equal optimizer (the
        update counts and ``param_dict``/``sym`` objects are not part of it: ``sym``'s
        multipliers are, through ``lr_mult``/``wd_mult``).
        """
        return _jsonable({"name": _OPTIMIZERS.name_of(type(self)), **self._config()})

    def dumps(self) -> str:
        """:meth:`describe` as a JSON string."""
        return json.dumps(self.describe(), sort_keys=True)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._config().items()
                         if k not in ("param_idx2name", "lr_mult", "wd_mult"))
        return f"{type(self).__name__}({args})"


def _jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and tuples turned into JSON's types (``np.float32(0.1)`` -> 0.1)."""
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def cast_to(source: Any, target: Any) -> None:
    """Write ``source`` into ``target`` converted to ``target``'s dtype (pushed to the engine)."""
    from mxkit.ndarray.registry import get_op

    if isinstance(source, BaseSparseNDArray) or isinstance(target, BaseSparseNDArray):
        converted = source.astype(target.dtype)
        if isinstance(target, BaseSparseNDArray):
            target[:] = converted
        else:
            target[:] = converted.tostype("default")
        return
    cast = get_op("Cast")
    invoke(cast, [source], cast.parse_params({"dtype": target.dtype}), out=target)


register = Optimizer.register
create = Optimizer.create_optimizer


def loads(text: str | bytes) -> Optimizer:
    """The optimizer a :meth:`Optimizer.dumps` string describes."""
    try:
        description = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise TrainingValueError(f"an optimizer description must be JSON text, got {text!r:.80}: {exc}") from None
    if not isinstance(description, dict) or "name" not in description:
        raise TrainingValueError(f"an optimizer description is a JSON object with a 'name', got {description!r:.80}")
    return create(**description)


__all__ = ["Optimizer", "SchedulerConflictError", "create", "loads", "register"]
