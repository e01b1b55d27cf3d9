"""Stochastic gradient descent and its momentum variants: SGD, NAG, Signum (MXNet 1.x)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from mxkit.ndarray.creation import zeros
from mxkit.train._registry import check_number
from mxkit.train.optimizer.base import register
from mxkit.train.optimizer.fused import FusedOptimizer, Plan


def _zeros_like(weight: Any, dtype: Any = None) -> Any:
    return zeros(weight.shape, weight.context, dtype=dtype if dtype is not None else weight.dtype)


class _MasterCopyMixin:
    """float16 weights with a float32 master copy, states kept as MXNet's ``(state, master)``."""

    multi_precision: bool

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)  # type: ignore[attr-defined]
        if weight.dtype == np.float16:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or slow convergence. "
                          "Consider using multi_precision=True option of the optimizer", stacklevel=2)
        return self.create_state(index, weight)  # type: ignore[attr-defined]

    def _split_master_state(self, state: Any) -> tuple[Any, Any]:
        inner, master = state
        return master, inner


@register
class SGD(_MasterCopyMixin, FusedOptimizer):
    """SGD with momentum and weight decay (MXNet's ``sgd_update``/``sgd_mom_update``).

    Without momentum: ``w = (1 - lr*wd) * w - lr * clip(rescale_grad * g, clip_gradient)``.
    With momentum::

        mom = momentum * mom - lr * wd * w - lr * clip(rescale_grad * g, clip_gradient)
        w += mom

    Parameters
    ----------
    momentum : float, default 0.0
        The momentum in ``[0, 1)``; 0 keeps no state.
    lazy_update : bool, default True
        Accepted for MXNet compatibility (row-sparse updates are not supported; every
        update is dense).
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = check_number("SGD", "momentum", momentum, low=0.0, high=1.0, high_open=True)
        self.lazy_update = bool(lazy_update)

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        params["lazy_update"] = self.lazy_update
        if state is None:
            return "sgd_update", [], params
        params["momentum"] = float(self.momentum)
        return "sgd_mom_update", [state], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "momentum": self.momentum, "lazy_update": self.lazy_update}


@register
class ccSGD(SGD):
    """Deprecated MXNet name of :class:`SGD`."""


@register
class NAG(_MasterCopyMixin, FusedOptimizer):
    """Nesterov accelerated gradient (MXNet 1.9.1's ``nag_mom_update``)::

        g' = clip(rescale_grad * g, clip_gradient) + wd * w
        w += momentum * (momentum * mom - lr * g') - lr * g'
        mom = momentum * mom - lr * g'

    (the momentum holds ``-lr`` times MXNet's documented one; as in MXNet 1.9.1 the
    momentum's ``wd * w`` term reads the weight after its update).

    Without momentum it is :class:`SGD`'s update.

    Parameters
    ----------
    momentum : float, default 0.0
        The momentum in ``[0, 1)``.
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = check_number("NAG", "momentum", momentum, low=0.0, high=1.0, high_open=True)

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        if state is None:
            params["lazy_update"] = True
            return "sgd_update", [], params
        params["momentum"] = float(self.momentum)
        return "nag_mom_update", [state], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "momentum": self.momentum}


@register
class Signum(FusedOptimizer):
    """signSGD and Signum (Bernstein et al. 2018; MXNet's ``signsgd_update``/``signum_update``)::

        mom = momentum * mom - (1 - momentum) * (clip(rescale_grad * g, clip_gradient) + wd * w)
        w = (1 - lr * wd_lh) * w + lr * sign(mom)

    With ``momentum=0``: ``w = (1 - lr * wd) * w - lr * sign(g)``.

    Parameters
    ----------
    learning_rate : float, default 0.01
        The learning rate.
    momentum : float, default 0.9
        The momentum in ``[0, 1)``.
    wd_lh : float, default 0.0
        Decoupled weight decay (Loshchilov and Hutter).
    **kwargs
        The :class:`Optimizer` arguments.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = check_number("Signum", "momentum", momentum, low=0.0, high=1.0, high_open=True)
        self.wd_lh = check_number("Signum", "wd_lh", wd_lh)

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        params = self._common_params(lr, wd)
        if state is None:
            return "signsgd_update", [], params
        params["momentum"] = float(self.momentum)
        params["wd_lh"] = float(self.wd_lh)
        return "signum_update", [state], params

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "momentum": self.momentum, "wd_lh": self.wd_lh}


__all__ = ["NAG", "SGD", "Signum", "ccSGD"]
