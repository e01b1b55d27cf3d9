"""Optimizers with per-coordinate step sizes: Adam, AdaGrad, RMSProp, AdaDelta, FTRL (MXNet 1.x)."""

from __future__ import annotations

import math
from typing import Any

from mxkit.ndarray.creation import zeros
from mxkit.train._registry import check_number
from mxkit.train.optimizer.base import register
from mxkit.train.optimizer.fused import FusedOptimizer, Plan


def _zeros_like(weight: Any) -> Any:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _decay_rate(owner: str, name: str, value: float) -> float:
    return check_number(owner, name, value, low=0.0, high=1.0, high_open=True)


@register
class Adam(FusedOptimizer):
    """Adam (Kingma and Ba 2014) with MXNet's bias correction folded into the learning rate::

        g' = clip(rescale_grad * g + wd * w, clip_gradient)
        m = beta1 * m + (1 - beta1) * g'
        v = beta2 * v + (1 - beta2) * g'^2
        lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
        w -= lr_t * m / (sqrt(v) + epsilon)

    ``t`` counts this weight's updates.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1, beta2 : float, default 0.9, 0.999
        Decay rates of the moment estimates, in ``[0, 1)``.
    epsilon : float, default 1e-8
    lazy_update : bool, default True
        Accepted for MXNet compatibility (updates are dense).
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = _decay_rate("Adam", "beta1", beta1)
        self.beta2 = _decay_rate("Adam", "beta2", beta2)
        self.epsilon = check_number("Adam", "epsilon", epsilon, low=0.0)
        self.lazy_update = bool(lazy_update)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # mean, variance

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        t = self._index_update_count[index]
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        params = self._common_params(lr, wd)
        params.update(beta1=float(self.beta1), beta2=float(self.beta2), epsilon=float(self.epsilon),
                      lazy_update=self.lazy_update)
        mean, var = state
        return "adam_update", [mean, var], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                "lazy_update": self.lazy_update}


@register
class AdaGrad(FusedOptimizer):
    """AdaGrad (Duchi et al. 2011)::

        g' = clip(rescale_grad * g, clip_gradient)
        history += g'^2
        w -= lr * (g' / sqrt(history + eps) + wd * w)

    Parameters
    ----------
    eps : float, default 1e-7
        Added under the square root for numerical stability.
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, eps: float = 1e-7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = check_number("AdaGrad", "eps", eps, low=0.0)

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight)  # history

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params["epsilon"] = float(self.float_stable_eps)
        return "_adagrad_update", [state], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "eps": self.float_stable_eps}


@register
class RMSProp(FusedOptimizer):
    """RMSProp; Tieleman and Hinton's, or with ``centered=True`` Graves' (2013, eq. 38-45).

    Not centered::

        g' = clip(rescale_grad * g + wd * w, clip_gradient)
        n = gamma1 * n + (1 - gamma1) * g'^2
        w -= lr * g' / sqrt(n + epsilon)

    Centered::

        n = gamma1 * n + (1 - gamma1) * g'^2
        g = gamma1 * g + (1 - gamma1) * g'
        delta = gamma2 * delta - lr * g' / sqrt(n - g^2 + epsilon)
        w += delta

    Parameters
    ----------
    learning_rate : float, default 0.001
    gamma1 : float, default 0.9
        Decay of the moving averages.
    gamma2 : float, default 0.9
        The momentum of the centered variant.
    epsilon : float, default 1e-8
    centered : bool, default False
    clip_weights : float, optional
        Clip the weights to ``[-clip_weights, clip_weights]`` after each update.
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, learning_rate: float = 0.001, gamma1: float = 0.9, gamma2: float = 0.9,
                 epsilon: float = 1e-8, centered: bool = False, clip_weights: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = _decay_rate("RMSProp", "gamma1", gamma1)
        self.gamma2 = _decay_rate("RMSProp", "gamma2", gamma2)
        self.epsilon = check_number("RMSProp", "epsilon", epsilon, low=0.0)
        self.centered = bool(centered)
        self.clip_weights = check_number("RMSProp", "clip_weights", clip_weights, low=0.0, allow_none=True)

    def create_state(self, index: Any, weight: Any) -> Any:
        if self.centered:
            return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))  # n, g, delta
        return (_zeros_like(weight),)  # n

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params.update(gamma1=float(self.gamma1), epsilon=float(self.epsilon),
                      clip_weights=float(self.clip_weights) if self.clip_weights else -1.0)
        if self.centered:
            params["gamma2"] = float(self.gamma2)
            return "rmspropalex_update", list(state), params
        return "rmsprop_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "gamma1": self.gamma1, "gamma2": self.gamma2, "epsilon": self.epsilon,
                "centered": self.centered, "clip_weights": self.clip_weights}


@register
class AdaDelta(FusedOptimizer):
    """AdaDelta (Zeiler 2012), as MXNet 1.x computes it (no learning rate)::

        g' = clip(rescale_grad * g, clip_gradient)
        acc_g = rho * acc_g + (1 - rho) * g'^2
        delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g'
        acc_delta = rho * acc_delta + (1 - rho) * delta^2
        w -= delta + wd * w

    Parameters
    ----------
    rho : float, default 0.9
        Decay rate, in ``[0, 1)``.
    epsilon : float, default 1e-5
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = _decay_rate("AdaDelta", "rho", rho)
        self.epsilon = check_number("AdaDelta", "epsilon", epsilon, low=0.0)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # accumulated g^2, accumulated delta^2

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(0.0, wd)  # AdaDelta has no learning rate
        params.update(rho=float(self.rho), epsilon=float(self.epsilon))
        return "_adadelta_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "rho": self.rho, "epsilon": self.epsilon}


@register
class Ftrl(FusedOptimizer):
    """FTRL-proximal (McMahan et al. 2013; MXNet's ``ftrl_update``)::

        g' = clip(rescale_grad * g, clip_gradient)
        z += g' - (sqrt(n + g'^2) - sqrt(n)) * w / lr
        n += g'^2
        w = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (|z| > lamda1)

    Parameters
    ----------
    lamda1 : float, default 0.01
        L1 regularisation strength.
    learning_rate : float, default 0.1
    beta : float, default 1
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lamda1 = check_number("Ftrl", "lamda1", lamda1, low=0.0)
        self.beta = check_number("Ftrl", "beta", beta)
        # MXNet sets lr after the base constructor, so a scheduler keeps its own base_lr
        self.lr = check_number("Ftrl", "learning_rate", learning_rate)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # z, n

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params.update(lamda1=float(self.lamda1), beta=float(self.beta))
        return "ftrl_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "lamda1": self.lamda1, "beta": self.beta}


__all__ = ["AdaDelta", "AdaGrad", "Adam", "Ftrl", "RMSProp"]
