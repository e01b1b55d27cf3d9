"""Layer-wise trust-ratio optimizers: LAMB and LARS (MXNet 1.x).

Both scale each parameter's step by a ratio of norms computed inside the fused kernel, on
the device that holds the weight, so no norm travels to the host between operations.
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.creation import zeros
from mxkit.train._registry import check_number
from mxkit.train.optimizer.base import register
from mxkit.train.optimizer.fused import FusedOptimizer, Plan


def _zeros_like(weight: Any) -> Any:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _decay(owner: str, name: str, value: float) -> float:
    return check_number(owner, name, value, low=0.0, high=1.0, high_open=True)


@register
class LAMB(FusedOptimizer):
    """LAMB, layer-wise adaptive moments (You et al. 2019), as MXNet 1.x::

        g' = clip(rescale_grad * g, clip_gradient)
        m = beta1 * m + (1 - beta1) * g';  v = beta2 * v + (1 - beta2) * g'^2
        r = m_hat / (sqrt(v_hat) + epsilon) + wd * w      (bias-corrected moments)
        w -= lr * (||w|| / ||r||) * r                      (ratio 1 when a norm is 0)

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1, beta2 : float, default 0.9, 0.999
    epsilon : float, default 1e-6
    lower_bound, upper_bound : float, optional
        Bounds on ``||w||`` in the ratio.
    bias_correction : bool, default True
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                 lower_bound: float | None = None, upper_bound: float | None = None, bias_correction: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = _decay("LAMB", "beta1", beta1)
        self.beta2 = _decay("LAMB", "beta2", beta2)
        self.epsilon = check_number("LAMB", "epsilon", epsilon, low=0.0)
        self.lower_bound = check_number("LAMB", "lower_bound", lower_bound, low=0.0, allow_none=True)
        self.upper_bound = check_number("LAMB", "upper_bound", upper_bound, low=0.0, allow_none=True)
        self.bias_correction = bool(bias_correction)

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params.update(beta1=float(self.beta1), beta2=float(self.beta2), epsilon=float(self.epsilon),
                      t=int(self._index_update_count[index]), bias_correction=self.bias_correction,
                      lower_bound=float(self.lower_bound) if self.lower_bound else -1.0,
                      upper_bound=float(self.upper_bound) if self.upper_bound else -1.0)
        return "_lamb_update", list(state), params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                "lower_bound": self.lower_bound, "upper_bound": self.upper_bound,
                "bias_correction": self.bias_correction}


_NO_LARS_SUFFIXES = ("gamma", "beta", "bias")


@register
class LARS(FusedOptimizer):
    """LARS, layer-wise adaptive rate scaling (You et al. 2017), as MXNet 1.x.

    SGD (with momentum) where each layer's learning rate is
    ``lr * eta * ||w|| / (||g|| * rescale_grad + wd * ||w|| + eps)`` (``lr`` if a norm is 0);
    parameters whose names end in ``gamma``, ``beta`` or ``bias`` keep ``lr``, and only
    ``*_weight`` parameters are decayed. With ``momentum_correction`` the momentum is scaled
    by ``lr_now / lr_before`` when a scheduler changes the rate.

    Parameters
    ----------
    momentum : float, default 0.0
    lazy_update : bool, default True
        Accepted for MXNet compatibility.
    eta : float, default 0.001
        The trust coefficient.
    eps : float, default 0
    momentum_correction : bool, default True
    **kwargs
        The :class:`Optimizer` arguments.
    """

    runtime_attributes = ("cur_lr", "last_lr")

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, eta: float = 0.001, eps: float = 0,
                 momentum_correction: bool = True, **kwargs: Any) -> None:
        self.cur_lr: float | None = None
        self.last_lr: float | None = None
        super().__init__(**kwargs)
        self.momentum = _decay("LARS", "momentum", momentum)
        self.lazy_update = bool(lazy_update)
        self.eta = check_number("LARS", "eta", eta, low=0.0)
        self.eps = check_number("LARS", "eps", eps, low=0.0)
        self.momentum_correction = bool(momentum_correction)

    def set_wd_mult(self, args_wd_mult: Any) -> None:
        """As :meth:`Optimizer.set_wd_mult`, but only ``*_weight`` parameters are decayed."""
        super().set_wd_mult(args_wd_mult)
        for name in self.idx2name.values():
            if name.endswith("_gamma") and name not in args_wd_mult and name not in self._sym_wd_names():
                self.wd_mult[name] = 0.0

    def _sym_wd_names(self) -> set:
        if not self.sym_info:
            return set()
        attr, arg_names = self.sym_info
        return {name for name in arg_names if name in attr and "__wd_mult__" in attr[name]}

    def _get_lrs(self, indices: Any) -> list[float]:
        # remember the previous call's rate for the momentum correction
        indices = list(indices)
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return super()._get_lrs(indices)

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        name = self.idx2name.get(index, str(index))
        params = self._common_params(lr, wd)
        params.update(eta=float(self.eta), eps=float(self.eps), lazy_update=self.lazy_update,
                      apply_lars=not name.endswith(_NO_LARS_SUFFIXES))
        if state is None:
            return "_lars_sgd_update", [], params
        momentum = self.momentum
        if self.momentum_correction and self.last_lr:
            momentum = momentum * (self.cur_lr / self.last_lr)
        params["momentum"] = float(momentum)
        return "_lars_sgd_mom_update", [state], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "momentum": self.momentum, "lazy_update": self.lazy_update, "eta": self.eta,
                "eps": self.eps, "momentum_correction": self.momentum_correction}


__all__ = ["LAMB", "LARS"]
