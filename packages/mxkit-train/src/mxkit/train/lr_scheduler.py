"""Learning-rate schedules (``mx.lr_scheduler``), MXNet 1.x's classes with warm-up.

A scheduler is called with ``num_update`` (the largest number of updates any weight has
had) and returns the learning rate. Like MXNet's, the step schedulers keep state
(``FactorScheduler`` lowers ``base_lr`` as it goes), so they are meant to be asked with
non-decreasing ``num_update``. Each scheduler has a JSON-able :meth:`LRScheduler.describe`,
and :func:`create` rebuilds one from it, which is how an optimizer description carries
its schedule.
"""

from __future__ import annotations

import logging
from math import cos, pi
from typing import Any

from mxkit.train._registry import NameRegistry, TrainingValueError, check_number

_SCHEDULERS = NameRegistry("lr_scheduler")
_LOG = logging.getLogger(__name__)


def _check_int(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise TrainingValueError(f"{owner}: {name} must be an int >= {low}, got {value!r}")
    return value


class LRScheduler:
    """Base class of learning-rate schedulers.

    Parameters
    ----------
    base_lr : float, default 0.01
        The learning rate after warm-up.
    warmup_steps : int, default 0
        Number of updates of warm-up before the schedule starts.
    warmup_begin_lr : float, default 0
        The learning rate warm-up starts from (at most ``base_lr``).
    warmup_mode : {'linear', 'constant'}
        ``linear`` rises from ``warmup_begin_lr`` to ``base_lr`` in equal steps;
        ``constant`` stays at ``warmup_begin_lr``.
    """

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear") -> None:
        owner = type(self).__name__
        self.base_lr = check_number(owner, "base_lr", base_lr)
        self.warmup_steps = _check_int(owner, "warmup_steps", warmup_steps, 0)
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = check_number(owner, "warmup_begin_lr", warmup_begin_lr)
        if self.warmup_begin_lr > self.warmup_final_lr:
            raise TrainingValueError(f"{owner}: warmup_begin_lr={warmup_begin_lr!r} is above base_lr={base_lr!r}; "
                                     f"warm-up rises to base_lr, so it must start at or below it")
        if warmup_mode not in ("linear", "constant"):
            raise TrainingValueError(f"{owner}: warmup_mode={warmup_mode!r}; expected 'linear' or 'constant'")
        self.warmup_mode = warmup_mode
        self._init_args = {"base_lr": base_lr, "warmup_steps": warmup_steps, "warmup_begin_lr": warmup_begin_lr,
                           "warmup_mode": warmup_mode}

    def get_warmup_lr(self, num_update: int) -> float:
        """The learning rate at update ``num_update`` (< ``warmup_steps``) of warm-up."""
        if num_update >= self.warmup_steps:
            raise TrainingValueError(f"get_warmup_lr({num_update}) is past warm-up ({self.warmup_steps} steps)")
        if self.warmup_mode == "linear":
            increase = (self.warmup_final_lr - self.warmup_begin_lr) * float(num_update) / float(self.warmup_steps)
            return self.warmup_begin_lr + increase
        return self.warmup_begin_lr

    def __call__(self, num_update: int) -> float:
        """The learning rate after ``num_update`` updates."""
        raise NotImplementedError(f"{type(self).__name__} must override __call__")

    def _config(self) -> dict[str, Any]:
        return dict(self._init_args)

    def describe(self) -> dict[str, Any]:
        """``{"name": ..., <constructor argument>: value}`` (the arguments it was built with)."""
        return {"name": _SCHEDULERS.name_of(type(self)), **self._config()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._config().items())})"


def register(klass: type) -> type:
    """Register a scheduler class under its lower-cased name (and without ``scheduler``)."""
    if not (isinstance(klass, type) and issubclass(klass, LRScheduler)):
        raise TrainingValueError(f"only subclasses of LRScheduler can be registered, got {klass!r}")
    short = klass.__name__.lower().removesuffix("scheduler")
    _SCHEDULERS.register(klass, short or klass.__name__)
    _SCHEDULERS.register(klass, klass.__name__)
    return klass


def create(name: str, **kwargs: Any) -> LRScheduler:
    """A scheduler by name (``factor``, ``multifactor``, ``poly``, ``cosine`` or the class
    name) built with ``kwargs``; ``create(**scheduler.describe())`` rebuilds one."""
    return _SCHEDULERS.lookup(name)(**kwargs)


@register
class FactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` every ``step`` updates::

        base_lr * factor ** floor((num_update - 1) / step), at least stop_factor_lr

    Parameters
    ----------
    step : int
        Updates between changes (>= 1).
    factor : float, default 1
        The multiplier (<= 1).
    stop_factor_lr : float, default 1e-8
        The learning rate does not go below this.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, step: int, factor: float = 1, stop_factor_lr: float = 1e-8, base_lr: float = 0.01,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.step = _check_int("FactorScheduler", "step", step, 1)
        self.factor = check_number("FactorScheduler", "factor", factor, high=1.0)
        self.stop_factor_lr = check_number("FactorScheduler", "stop_factor_lr", stop_factor_lr)
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                _LOG.info("Update[%d]: now learning rate arrived at %0.5e, will not change in the future",
                          num_update, self.base_lr)
            else:
                _LOG.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "step": self.step, "factor": self.factor, "stop_factor_lr": self.stop_factor_lr}


@register
class MultiFactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` after each update count in ``step``.

    Parameters
    ----------
    step : list of int
        Increasing update counts (>= 1) after which the rate changes.
    factor : float, default 1
        The multiplier (<= 1).
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, step: list[int], factor: float = 1, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear") -> None:
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) < 1:
            raise TrainingValueError(f"MultiFactorScheduler: step must be a non-empty list of ints, got {step!r}")
        for i, value in enumerate(step):
            _check_int("MultiFactorScheduler", f"step[{i}]", value, 1)
            if i and value <= step[i - 1]:
                raise TrainingValueError(f"MultiFactorScheduler: step must be increasing, got {list(step)!r}")
        self.step = list(step)
        self.factor = check_number("MultiFactorScheduler", "factor", factor, high=1.0)
        self.cur_step_ind = 0
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind <= len(self.step) - 1:
            if num_update > self.step[self.cur_step_ind]:
                self.count = self.step[self.cur_step_ind]
                self.cur_step_ind += 1
                self.base_lr *= self.factor
                _LOG.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
            else:
                return self.base_lr
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "step": list(self.step), "factor": self.factor}


class _DecayToFinal(LRScheduler):
    """Warm-up, then a decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates (Poly, Cosine)."""

    def __init__(self, max_update: int, base_lr: float, final_lr: float, warmup_steps: int, warmup_begin_lr: float,
                 warmup_mode: str) -> None:
        name = type(self).__name__
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = _check_int(name, "max_update", max_update, 1)
        if self.max_update <= self.warmup_steps:
            raise TrainingValueError(f"{name}: max_update={max_update} must exceed warmup_steps={warmup_steps}")
        self.base_lr_orig = self.base_lr
        self.final_lr = check_number(name, "final_lr", final_lr)
        self.max_steps = self.max_update - self.warmup_steps

    def _decay(self, steps: int) -> float:
        """The fraction of ``base_lr - final_lr`` left ``steps`` updates after the warm-up."""
        raise NotImplementedError

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                self._decay(num_update - self.warmup_steps)
        return self.base_lr

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "max_update": self.max_update, "final_lr": self.final_lr}


@register
class PolyScheduler(_DecayToFinal):
    """Polynomial decay after warm-up::

        final_lr + (base_lr - final_lr) * (1 - (num_update - warmup_steps) / (max_update - warmup_steps)) ** pwr

    and ``final_lr`` past ``max_update``.

    Parameters
    ----------
    max_update : int
        Updates until the rate reaches ``final_lr`` (>= 1).
    base_lr : float, default 0.01
    pwr : float, default 2
        The power of the decay.
    final_lr : float, default 0
    warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2, final_lr: float = 0,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear") -> None:
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = check_number("PolyScheduler", "pwr", pwr)

    def _decay(self, steps: int) -> float:
        return pow(1 - float(steps) / float(self.max_steps), self.power)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "pwr": self.power}


@register
class CosineScheduler(_DecayToFinal):
    """Cosine decay after warm-up::

        final_lr + (base_lr - final_lr) * (1 + cos(pi * (num_update - warmup_steps) / (max_update - warmup_steps))) / 2

    and ``final_lr`` past ``max_update``.

    Parameters
    ----------
    max_update : int
        Updates until the rate reaches ``final_lr`` (>= 1).
    base_lr : float, default 0.01
    final_lr : float, default 0
    warmup_steps, warmup_begin_lr, warmup_mode
        As :class:`LRScheduler`.
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear") -> None:
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _decay(self, steps: int) -> float:
        return (1 + cos(pi * steps / self.max_steps)) / 2


__all__ = ["CosineScheduler", "FactorScheduler", "LRScheduler", "MultiFactorScheduler", "PolyScheduler", "create",
           "register"]
