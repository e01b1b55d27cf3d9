"""Weight initializers (``mx.init``/``mx.initializer``), MXNet 1.x's classes and dispatch.

An initializer is called as ``init(desc, arr)``: ``desc`` is an :class:`InitDesc` (a
``str``, the variable's name, carrying its symbol attributes) or a plain name, ``arr`` the
NDArray to fill in place. The name's suffix chooses what happens, as in MXNet: ``*weight``
gets the initializer's own distribution, ``*bias`` and ``*beta`` 0, ``*gamma`` 1,
``*moving_mean``/``*moving_inv_var``/``*moving_avg``/``*min`` 0, ``*moving_var``/``*max``
1. A variable's ``__init__`` attribute (``mx.sym.Variable("w", init=mx.init.One())``
stores the initializer's :meth:`Initializer.dumps` there) overrides the global choice.

Random initializers draw through ``mx.nd.random`` into the array's own device, so
``mx.random.seed`` makes them reproducible and they run on the engine like any operator.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from math import sqrt
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import NameRegistry, TrainingValueError, UnknownNameError, check_number

_INITIALIZERS = NameRegistry("initializer")
_LOG = logging.getLogger(__name__)


class InitDesc(str):
    """The name of a variable with its attributes, what an initializer is called with.

    Parameters
    ----------
    name : str
        The variable's name.
    attrs : dict of str to str, optional
        Its attributes (``Symbol.attr_dict()[name]``); ``__init__`` picks an initializer.
    global_init : Initializer, optional
        The initializer to fall back to (set on first use).
    """

    attrs: dict[str, str]
    global_init: Any

    def __new__(cls, name: str, attrs: Mapping[str, str] | None = None, global_init: Any = None) -> InitDesc:
        desc = super().__new__(cls, name)
        desc.attrs = dict(attrs or {})
        desc.global_init = global_init
        return desc


def _fill(arr: Any, value: Any) -> None:
    arr[:] = value


def _check_array(arr: Any, name: Any) -> None:
    from mxkit.ndarray import NDArray

    if not isinstance(arr, NDArray):
        raise TrainingValueError(f"an initializer fills an NDArray, got {type(arr).__name__} for {name!r}")


class Initializer:
    """The base class of initializers; subclasses implement ``_init_weight(name, arr)``.

    Parameters
    ----------
    **kwargs
        The constructor arguments, kept for :meth:`dumps`.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Callable[[Any], str] | None = None

    def set_verbosity(self, verbose: bool = False, print_func: Callable[[Any], str] | None = None) -> Initializer:
        """Log each initialized array with ``print_func(arr)`` (default: its RMS); returns ``self``."""
        self._verbose = verbose
        if print_func is None:
            def print_func(arr: Any) -> str:
                values = arr.asnumpy()
                return str(float(np.linalg.norm(values) / sqrt(max(values.size, 1))))
        self._print_func = print_func
        return self

    def _verbose_print(self, desc: Any, init: str, arr: Any) -> None:
        if self._verbose and self._print_func:
            _LOG.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self) -> str:
        """The JSON description ``'["<name>", {<arguments>}]'`` (MXNet's format)."""
        return json.dumps([_INITIALIZERS.name_of(type(self)), self._kwargs])

    def __call__(self, desc: Any, arr: Any) -> None:
        """Fill ``arr`` in place for the variable ``desc`` (an :class:`InitDesc` or a name)."""
        if not isinstance(desc, str):
            raise TrainingValueError(f"an initializer is called with the variable's name (str or InitDesc) and "
                                     f"the NDArray, got {type(desc).__name__} {desc!r}")
        _check_array(arr, desc)
        if not isinstance(desc, InitDesc):
            desc = InitDesc(desc)
        if desc.global_init is None:
            desc.global_init = self
        chosen = desc.attrs.get("__init__", "")
        if chosen:
            create(chosen)._init_weight(desc, arr)
            self._verbose_print(desc, chosen, arr)
            return
        for suffix, method in _SUFFIX_DISPATCH:
            if desc.endswith(suffix):
                getattr(self, method)(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        if desc.startswith("upsampling"):
            self._init_bilinear(desc, arr)
            return
        self._init_default(desc, arr)

    def _init_zero(self, _: Any, arr: Any) -> None:
        _fill(arr, 0.0)

    def _init_one(self, _: Any, arr: Any) -> None:
        _fill(arr, 1.0)

    def _init_bias(self, _: Any, arr: Any) -> None:
        _fill(arr, 0.0)

    def _init_gamma(self, _: Any, arr: Any) -> None:
        _fill(arr, 1.0)

    def _init_beta(self, _: Any, arr: Any) -> None:
        _fill(arr, 0.0)

    def _init_bilinear(self, _: Any, arr: Any) -> None:
        _fill(arr, _bilinear_kernel(arr.shape))

    def _init_weight(self, name: Any, arr: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _init_weight")

    def _init_default(self, name: Any, _: Any) -> None:
        suffixes = ", ".join(s for s, _m in _SUFFIX_DISPATCH)
        raise TrainingValueError(f"unknown initialization pattern for {name!r}: default initialization covers names "
                                 f"ending in {suffixes}; give the variable an initializer with "
                                 f"mx.sym.Variable({str(name)!r}, init=mx.init.Uniform()) or use mx.init.Mixed")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._kwargs.items())})"


# suffix -> method, in MXNet's order (``weight`` before the rest: "fc_weight" never ends in "bias")
_SUFFIX_DISPATCH: tuple[tuple[str, str], ...] = (
    ("weight", "_init_weight"),
    ("bias", "_init_bias"),
    ("gamma", "_init_gamma"),
    ("beta", "_init_beta"),
    ("moving_mean", "_init_zero"),
    ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"),
    ("moving_avg", "_init_zero"),
    ("min", "_init_zero"),
    ("max", "_init_one"),
)


def _bilinear_kernel(shape: Sequence[int]) -> np.ndarray:
    """MXNet's bilinear up-sampling filter for a 4-d weight (same value for every channel pair)."""
    if len(shape) != 4:
        raise ShapeError(f"a bilinear weight must be 4-d (out, in, height, width), got shape {tuple(shape)}")
    f = np.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    x = np.arange(shape[3])
    y = np.arange(shape[2])
    plane = np.outer(1 - np.abs(y / f - c), 1 - np.abs(x / f - c)).astype(np.float32)
    return np.broadcast_to(plane, tuple(shape)).copy()


def register(klass: type) -> type:
    """Register an initializer class under its lower-cased name (a class decorator)."""
    if not (isinstance(klass, type) and issubclass(klass, Initializer)):
        raise TrainingValueError(f"only subclasses of Initializer can be registered, got {klass!r}")
    return _INITIALIZERS.register(klass)


def alias(*aliases: str) -> Callable[[type], type]:
    """A class decorator registering an initializer under extra names."""
    return _INITIALIZERS.alias(*aliases)


def create(init: Any, **kwargs: Any) -> Initializer:
    """An initializer from an instance (returned as is), a name with arguments, a
    ``dumps()`` JSON string (``'["xavier", {"magnitude": 2}]'``) or a dict description.

    Raises
    ------
    UnknownNameError
        For a name nothing registered (the message lists the choices).
    """
    if isinstance(init, Initializer):
        if kwargs:
            raise TrainingValueError(f"create() got an initializer instance {init!r} and extra arguments {kwargs}")
        return init
    if isinstance(init, Mapping):
        description = dict(init)
        return create(description.pop("name"), **description, **kwargs)
    if not isinstance(init, str):
        raise UnknownNameError(f"an initializer is an Initializer, a name or a JSON description, got "
                               f"{type(init).__name__} {init!r}")
    text = init.strip()
    if text.startswith("["):
        try:
            name, arguments = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise TrainingValueError(f"bad initializer description {init!r}: expected '[\"name\", {{...}}]' "
                                     f"({exc})") from None
        return create(name, **arguments)
    if text.startswith("{"):
        return create(json.loads(text))
    return _INITIALIZERS.lookup(text)(**kwargs)


class Load:
    """Initialize from saved parameters, falling back to ``default_init`` for other names.

    Parameters
    ----------
    param : str or dict of str to NDArray
        A ``.params`` file (``mx.nd.save`` format) or a dict; ``arg:``/``aux:`` prefixes
        are dropped.
    default_init : Initializer, optional
        Used for names that ``param`` lacks.
    verbose : bool, default False
        Log where each array came from.
    """

    def __init__(self, param: Any, default_init: Any = None, verbose: bool = False) -> None:
        if isinstance(param, str):
            from mxkit.ndarray import load

            param = load(param)
        if not isinstance(param, Mapping):
            raise TrainingValueError(f"Load needs a parameter file name or a dict of name -> NDArray, got "
                                     f"{type(param).__name__}")
        self.param = {}
        for name, arr in param.items():
            key = name[4:] if name.startswith(("arg:", "aux:")) else name
            self.param[key] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name: Any, arr: Any) -> None:
        """Fill ``arr`` with the loaded array called ``name`` (or the default initializer)."""
        if name in self.param:
            loaded = self.param[name]
            if tuple(arr.shape) != tuple(loaded.shape):
                raise ShapeError(f"parameter {str(name)!r} cannot be initialized from loading: the target has shape "
                                 f"{tuple(arr.shape)}, the loaded array {tuple(loaded.shape)}")
            _fill(arr, loaded)
            if self.verbose:
                _LOG.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise TrainingValueError(f"cannot initialize {str(name)!r}: it is not in the loaded parameters "
                                     f"({', '.join(sorted(self.param)) or 'none'}) and no default_init was given")
        self.default_init(name, arr)
        if self.verbose:
            _LOG.info("Initialized %s by default", name)


class Mixed:
    """Initialize each parameter with the first initializer whose pattern matches its name.

    Parameters
    ----------
    patterns : list of str
        Regular expressions (``re.match``, so anchored at the start).
    initializers : list of Initializer
        One per pattern.
    """

    def __init__(self, patterns: Sequence[str], initializers: Sequence[Any]) -> None:
        if len(patterns) != len(initializers):
            raise TrainingValueError(f"Mixed needs one initializer per pattern, got {len(patterns)} patterns and "
                                     f"{len(initializers)} initializers")
        self.map = [(re.compile(p), create(i) if isinstance(i, str) else i) for p, i in zip(patterns, initializers)]

    def __call__(self, name: Any, arr: Any) -> None:
        """Fill ``arr`` with the first matching initializer."""
        for pattern, init in self.map:
            if pattern.match(name):
                init(name, arr)
                return
        raise TrainingValueError(f"parameter name {str(name)!r} matched none of the patterns "
                                 f"{[p.pattern for p, _ in self.map]}; add a '.*' pattern last with a default "
                                 f"initializer")


@register
@alias("zeros")
class Zero(Initializer):
    """Initialize weights to 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: Any) -> None:
        _fill(arr, 0.0)


@register
@alias("ones")
class One(Initializer):
    """Initialize weights to 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: Any) -> None:
        _fill(arr, 1.0)


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
        _fill(arr, value)

    def dumps(self) -> str:
        value = self._kwargs["value"]
        if not np.isscalar(value):
            value = np.asarray(value if isinstance(value, (np.ndarray, list, tuple)) else value.asnumpy()).tolist()
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
        _fill(arr, (self.scale * factor.reshape(arr.shape)).astype(np.float32))


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
        _fill(arr, _bilinear_kernel(arr.shape))


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
        _fill(arr, values)


__all__ = ["Bilinear", "Constant", "InitDesc", "Initializer", "LSTMBias", "Load", "MSRAPrelu", "Mixed", "Normal",
           "One", "Orthogonal", "Uniform", "Xavier", "Zero", "alias", "create", "register"]
