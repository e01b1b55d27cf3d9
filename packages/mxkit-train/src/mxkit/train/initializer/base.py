"""The :class:`Initializer` base class, its name-suffix dispatch, the registry, ``create``,
and the combinators :class:`Mixed` and :class:`Load`.

An initializer is called as ``init(desc, arr)``: ``desc`` is an :class:`InitDesc` (a
``str``, the variable's name, carrying its symbol attributes) or a plain name, ``arr`` the
NDArray to fill in place. The name's suffix chooses what happens, as in MXNet: ``*weight``
gets the initializer's own distribution, ``*bias`` and ``*beta`` 0, ``*gamma`` 1,
``*moving_mean``/``*moving_inv_var``/``*moving_avg``/``*min`` 0, ``*moving_var``/``*max``
1. A variable's ``__init__`` attribute (``mx.sym.Variable("w", init=mx.init.One())``
stores the initializer's :meth:`Initializer.dumps` there) overrides the global choice.
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
from mxkit.train._registry import NameRegistry, TrainingValueError, UnknownNameError

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


def fill(arr: Any, value: Any) -> None:
    """Write ``value`` (a number or an array) into every element of ``arr`` (pushed to the engine)."""
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
        fill(arr, 0.0)

    def _init_one(self, _: Any, arr: Any) -> None:
        fill(arr, 1.0)

    def _init_bias(self, _: Any, arr: Any) -> None:
        fill(arr, 0.0)

    def _init_gamma(self, _: Any, arr: Any) -> None:
        fill(arr, 1.0)

    def _init_beta(self, _: Any, arr: Any) -> None:
        fill(arr, 0.0)

    def _init_bilinear(self, _: Any, arr: Any) -> None:
        fill(arr, bilinear_kernel(arr.shape))

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


def bilinear_kernel(shape: Sequence[int]) -> np.ndarray:
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


def create(init: Any, /, **kwargs: Any) -> Initializer:
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
            fill(arr, loaded)
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


__all__ = ["InitDesc", "Initializer", "Load", "Mixed", "alias", "create", "register"]
