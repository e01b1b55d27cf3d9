"""More of MXNet 1.x's optimizers: Adamax, Nadam, FTML, DCASGD, SGLD and
Test.

Adamax, Nadam and DCASGD were Python-level NDArray arithmetic in MXNet 1.x; here they
are fused operators like the others (same formulas, term by term). FTML is MXNet's
``ftml_update``.
"""

from __future__ import annotations

import math
from typing import Any

from mxkit.ndarray.creation import zeros
from mxkit.train._registry import check_number
from mxkit.train.optimizer.base import Optimizer, register
from mxkit.train.optimizer.fused import FusedOptimizer, Plan


def _zeros_like(weight: Any) -> Any:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _decay(owner: str, name: str, value: float) -> float:
    return check_number(owner, name, value, low=0.0, high=1.0, high_open=True)


@register
class Adamax(FusedOptimizer):
    """AdaMax (Kingma and Ba 2014, section 7)::

        g' = clip(rescale_grad * g + wd * w, clip_gradient)
        m = beta1 * m + (1 - beta1) * g';  u = max(beta2 * u, |g'|)
        w -= lr / (1 - beta1^t) * m / u

    Parameters
    ----------
    learning_rate : float, default 0.002
    beta1, beta2 : float, default 0.9, 0.999
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = _decay("Adamax", "beta1", beta1)
        self.beta2 = _decay("Adamax", "beta2", beta2)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        t = self._index_update_count[index]
        params = self._common_params(lr / (1.0 - self.beta1 ** t), wd)
        params.update(beta1=float(self.beta1), beta2=float(self.beta2))
        return "_adamax_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "beta1": self.beta1, "beta2": self.beta2}


@register
class Nadam(FusedOptimizer):
    """Nesterov-accelerated Adam (Dozat 2015) with MXNet's momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96^(t * schedule_decay))``.

    As in MXNet, the schedule product ``m_schedule`` is one number for the optimizer,
    multiplied at every update of any weight.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1, beta2 : float, default 0.9, 0.999
    epsilon : float, default 1e-8
    schedule_decay : float, default 0.004
    **kwargs
        The :class:`Optimizer` arguments.
    """

    runtime_attributes = ("m_schedule",)

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, schedule_decay: float = 0.004, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = _decay("Nadam", "beta1", beta1)
        self.beta2 = _decay("Nadam", "beta2", beta2)
        self.epsilon = check_number("Nadam", "epsilon", epsilon, low=0.0)
        self.schedule_decay = check_number("Nadam", "schedule_decay", schedule_decay)
        self.m_schedule = 1.0

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        t = self._index_update_count[index]
        momentum_t = self.beta1 * (1.0 - 0.5 * pow(0.96, t * self.schedule_decay))
        momentum_t_1 = self.beta1 * (1.0 - 0.5 * pow(0.96, (t + 1) * self.schedule_decay))
        self.m_schedule = self.m_schedule * momentum_t
        params = self._common_params(lr, wd)
        params.update(beta1=float(self.beta1), beta2=float(self.beta2), epsilon=float(self.epsilon),
                      momentum_t=momentum_t, momentum_t_1=momentum_t_1, m_schedule=self.m_schedule,
                      m_schedule_next=self.m_schedule * momentum_t_1, beta2_power=pow(self.beta2, t))
        return "_nadam_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                "schedule_decay": self.schedule_decay}


@register
class FTML(FusedOptimizer):
    """FTML, Follow the Moving Leader (Zheng and Kwok 2017; MXNet's ``ftml_update``)::

        g' = clip(rescale_grad * g + wd * w, clip_gradient)
        v = beta2 * v + (1 - beta2) * g'^2
        d_t = (1 - beta1^t) / lr * (sqrt(v / (1 - beta2^t)) + epsilon)
        z = beta1 * z + (1 - beta1) * g' - (d_t - beta1 * d_{t-1}) * w
        w = -z / d_t

    Parameters
    ----------
    beta1 : float, default 0.6
    beta2 : float, default 0.999
    epsilon : float, default 1e-8
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1 = _decay("FTML", "beta1", beta1)
        self.beta2 = _decay("FTML", "beta2", beta2)
        self.epsilon = check_number("FTML", "epsilon", epsilon, low=0.0)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))  # d, v, z

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params.update(beta1=float(self.beta1), beta2=float(self.beta2), epsilon=float(self.epsilon),
                      t=int(self._index_update_count[index]))
        return "ftml_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}


@register
class DCASGD(FusedOptimizer):
    """Delay-compensated asynchronous SGD (Zheng et al. 2016)::

        g' = clip(rescale_grad * g, clip_gradient)
        mom = momentum * mom - lr * (g' + wd * w + lamda * g'^2 * (w - w_previous))
        w_previous = w;  w += mom

    Parameters
    ----------
    momentum : float, default 0.0
    lamda : float, default 0.04
        The compensation strength.
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = _decay("DCASGD", "momentum", momentum)
        self.lamda = check_number("DCASGD", "lamda", lamda)

    def create_state(self, index: Any, weight: Any) -> Any:
        momentum = _zeros_like(weight) if self.momentum != 0.0 else None
        return (momentum, weight.copy())  # momentum, previous weight

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        mom, previous = state
        params = self._common_params(lr, wd)
        params["lamda"] = float(self.lamda)
        if mom is None:
            return "_dcasgd_update", [previous], params
        params["momentum"] = float(self.momentum)
        return "_dcasgd_mom_update", [mom, previous], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "momentum": self.momentum, "lamda": self.lamda}


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (Welling and Teh 2011)::

        w += -lr / 2 * (clip(rescale_grad * g, clip_gradient) + wd * w) + N(0, sqrt(lr))

    The noise is drawn by ``mx.nd.random`` on the weight's device (``mx.random.seed``
    makes it reproducible).
    """

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        from mxkit.ndarray import random

        self._check_arrays(weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        scaled = grad * self.rescale_grad
        if self.clip_gradient:
            scaled = scaled.clip(-self.clip_gradient, self.clip_gradient)
        noise = random.normal(0.0, math.sqrt(lr), shape=weight.shape, dtype=weight.dtype, ctx=weight.context)
        weight[:] = weight - (scaled + weight * wd) * (lr / 2) + noise


@register
class Test(Optimizer):
    """MXNet's test optimizer: ``w += rescale_grad * g``, and the state is a copy of ``w``."""

    def create_state(self, index: Any, weight: Any) -> Any:
        return zeros(weight.shape, weight.context)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        weight[:] = weight + grad * self.rescale_grad
        state[:] = weight


__all__ = ["DCASGD", "FTML", "SGLD", "Adamax", "Nadam", "Test"]
