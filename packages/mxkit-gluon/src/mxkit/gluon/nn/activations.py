"""Activation layers: Activation, LeakyReLU, PReLU, ELU, SELU, Swish, GELU."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock


class Activation(HybridBlock):
    """An elementwise activation: ``relu``, ``sigmoid``, ``tanh``, ``softrelu`` or ``softsign``.

    Its name is the activation's (``relu0``), as in MXNet.
    """

    def __init__(self, activation: str, **kwargs: Any) -> None:
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self) -> str:
        return self._act_type

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Activation(x, act_type=self._act_type, name="fwd")

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"


class LeakyReLU(HybridBlock):
    """``x`` for positive inputs, ``alpha * x`` otherwise."""

    def __init__(self, alpha: float, **kwargs: Any) -> None:
        from mxkit.gluon.parameter import GluonError

        if alpha < 0:
            raise GluonError(f"LeakyReLU: slope alpha must be no less than 0, got {alpha}")
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name="fwd")


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope per channel (``alpha``, initialised to 0.25)."""

    def __init__(self, alpha_initializer: Any = None, in_channels: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if alpha_initializer is None:
            from mxkit.train.initializer import Constant

            alpha_initializer = Constant(0.25)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,), init=alpha_initializer)

    def hybrid_forward(self, F: Any, x: Any, alpha: Any) -> Any:
        return F.LeakyReLU(x, gamma=alpha, act_type="prelu", name="fwd")


class ELU(HybridBlock):
    """``x`` for positive inputs, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha)


class SELU(HybridBlock):
    """Scaled ELU (Klambauer et al., 2017)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="selu", name="fwd")


class GELU(HybridBlock):
    """Gaussian error linear unit (the erf form)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(x, act_type="gelu", name="fwd")


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)``."""

    def __init__(self, beta: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return x * F.sigmoid(self._beta * x, name="fwd")
