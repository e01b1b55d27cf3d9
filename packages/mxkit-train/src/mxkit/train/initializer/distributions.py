"""The initializers: constants, uniform and normal draws, Xavier/MSRA with MXNet's fans,
orthogonal matrices, bilinear filters and LSTM biases.

Random initializers draw through ``mx.nd.random`` into the array's own device, so
``mx.random.seed`` makes them reproducible and they run on the engine like any operator.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError, check_number
from mxkit.train.initializer.base import _INITIALIZERS, Initializer, alias, bilinear_kernel, fill, register


@register
@alias("zeros")
class Zero(Initializer):
    """Initialize weights to 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: Any) -> None:
        fill(arr, 0.0)


@register
@alias("ones")
class One(Initializer):
    """Initialize weights to 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: Any) -> None:
        fill(arr, 1.0)


@register
class Constant(Initializer):
    """Initialize weights to ``value`` (a number, or an array broadcastable to the weight).

    Parameters
    ----------
    value : float or array-like or NDArray
    """

    def __init__(self, value: Any) -> None:
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _: Any, arr: Any) -> None:
        value = self.value
        if isinstance(value, (list, tuple)):
            value = np.asarray(value, dtype=np.float32)
        fill(arr, value)

    def dumps(self) -> str:
        value = self._kwargs["value"]
        if not np.isscalar(value):
            value = np.asarray(value if isinstance(value, (np.ndarray, list, tuple)) else value.asnumpy()).tolist()
            # as MXNet: the description keeps the JSON form, so json.dumps(self._kwargs) works too
            self._kwargs["value"] = value
        return json.dumps([_INITIALIZERS.name_of(type(self)), {"value": value}])


@register
class Uniform(Initializer):
    """Initialize weights uniformly from ``[-scale, scale]``.

    Parameters
    ----------
    scale : float, default 0.07
    """

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = check_number("Uniform", "scale", scale, low=0.0)

    def _init_weight(self, _: Any, arr: Any) -> None:
        from mxkit.ndarray import random

        random.uniform(-self.scale, self.scale, shape=arr.shape, out=arr)


@register
class Normal(Initializer):
    """Initialize weights from a normal distribution with mean 0 and deviation ``sigma``.

    Parameters
    ----------
    sigma : float, default 0.01
    """

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = check_number("Normal", "sigma", sigma, low=0.0)

    def _init_weight(self, _: Any, arr: Any) -> None:
        from mxkit.ndarray import random

        random.normal(0.0, self.sigma, shape=arr.shape, out=arr)


@register
class Orthogonal(Initializer):
    """Initialize weights as a scaled orthogonal matrix (Saxe et al. 2013).

    The weight is viewed as ``(shape[0], prod(shape[1:]))``; a random matrix of that shape
    is decomposed with the SVD and the orthogonal factor of the same shape is used.

    Parameters
    ----------
    scale : float, default 1.414
    rand_type : {'uniform', 'normal'}
        The distribution of the random matrix.
    """

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        super().__init__(scale=scale, rand_type=rand_type)
        if rand_type not in ("uniform", "normal"):
            raise TrainingValueError(f"Orthogonal: rand_type={rand_type!r}; expected 'uniform' or 'normal'")
        self.scale = check_number("Orthogonal", "scale", scale)
        self.rand_type = rand_type

    def _init_weight(self, name: Any, arr: Any) -> None:
        from mxkit.ndarray import random

        if len(arr.shape) < 2:
            raise ShapeError(f"Orthogonal initializer needs an array of at least 2 dimensions for {str(name)!r}, "
                             f"got shape {tuple(arr.shape)}")
        rows, cols = arr.shape[0], int(np.prod(arr.shape[1:]))
        ctx = arr.context
        if self.rand_type == "uniform":
            sample = random.uniform(-1.0, 1.0, shape=(rows, cols), ctx=ctx).asnumpy()
        else:
            sample = random.normal(0.0, 1.0, shape=(rows, cols), ctx=ctx).asnumpy()
        u, _, v = np.linalg.svd(sample, full_matrices=False)
        factor = u if u.shape == sample.shape else v
        fill(arr, (self.scale * factor.reshape(arr.shape)).astype(np.float32))


def _fans(name: Any, shape: Sequence[int]) -> tuple[float, float]:
    """MXNet's fan-in and fan-out: ``shape[1]`` and ``shape[0]`` times the receptive field."""
    if len(shape) < 2:
        raise ShapeError(f"Xavier initializer cannot be applied to vector {str(name)!r} of shape {tuple(shape)}; "
                         f"it requires at least 2 dimensions")
    receptive = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
    return shape[1] * receptive, shape[0] * receptive


@register
class Xavier(Initializer):
    """Xavier/Glorot initialization, with MXNet's parameters.

    With ``fan_in = shape[1] * prod(shape[2:])`` and ``fan_out = shape[0] * prod(shape[2:])``
    (a convolution weight's receptive field counts), ``factor`` is their mean (``avg``),
    ``fan_in`` (``in``) or ``fan_out`` (``out``), and ``scale = sqrt(magnitude / factor)``:
    weights come from ``U(-scale, scale)`` (``uniform``) or ``N(0, scale)`` (``gaussian``).

    Parameters
    ----------
    rnd_type : {'uniform', 'gaussian'}
    factor_type : {'avg', 'in', 'out'}
    magnitude : float, default 3
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3) -> None:
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in ("uniform", "gaussian"):
            raise TrainingValueError(f"{type(self).__name__}: rnd_type={rnd_type!r}; expected 'uniform' or "
                                     f"'gaussian'")
        if factor_type not in ("avg", "in", "out"):
            raise TrainingValueError(f"{type(self).__name__}: factor_type={factor_type!r}; expected 'avg', 'in' "
                                     f"or 'out'")
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(check_number(type(self).__name__, "magnitude", magnitude, low=0.0))

    def scale_for(self, name: Any, shape: Sequence[int]) -> float:
        """The bound (uniform) or deviation (gaussian) used for a weight of ``shape``."""
        fan_in, fan_out = _fans(name, shape)
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        return float(np.sqrt(self.magnitude / factor))

    def _init_weight(self, name: Any, arr: Any) -> None:
        from mxkit.ndarray import random

        scale = self.scale_for(name, arr.shape)
        if self.rnd_type == "uniform":
            random.uniform(-scale, scale, shape=arr.shape, out=arr)
        else:
            random.normal(0.0, scale, shape=arr.shape, out=arr)


@register
class MSRAPrelu(Xavier):
    """He et al. (2015) initialization for (P)ReLU networks: Gaussian Xavier with
    ``magnitude = 2 / (1 + slope^2)``.

    Parameters
    ----------
    factor_type : {'avg', 'in', 'out'}
    slope : float, default 0.25
        The initial negative slope of the PReLU units.
    """

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        check_number("MSRAPrelu", "slope", slope)
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Initialize a 4-d weight as the bilinear up-sampling filter."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: Any) -> None:
        fill(arr, bilinear_kernel(arr.shape))


@register
class LSTMBias(Initializer):
    """Biases of an LSTM cell: 0 except the forget gate's (the second quarter).

    Parameters
    ----------
    forget_bias : float, default 1.0
    """

    def __init__(self, forget_bias: float = 1.0) -> None:
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = check_number("LSTMBias", "forget_bias", forget_bias)

    def _init_weight(self, _: Any, arr: Any) -> None:
        values = np.zeros(arr.shape, dtype=np.float32)
        quarter = arr.shape[0] // 4
        values[quarter:2 * quarter] = self.forget_bias
        fill(arr, values)


__all__ = ["Bilinear", "Constant", "LSTMBias", "MSRAPrelu", "Normal", "One", "Orthogonal", "Uniform", "Xavier", "Zero"]
