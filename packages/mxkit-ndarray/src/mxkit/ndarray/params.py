"""Typed operator parameters that parse and print MXNet's string attributes.

MXNet keeps every operator parameter as a string in its graph JSON (``"(3, 3)"``,
``"True"``, ``"relu"``, ``"None"``); the imperative API accepts Python values. A
:class:`ParamSchema` turns either form into one typed dict, checks it, and prints it
back in the string form MXNet writes, so NDArray calls and Symbol graphs share it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mxkit.core.errors import MXKitError

_REQUIRED = object()


class ParamError(MXKitError, ValueError):
    """An operator parameter is missing, unknown, or of the wrong type or value."""


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise ValueError(f"expected True/False/1/0, got {value!r}")
    if isinstance(value, (bool, int)) or (hasattr(value, "__bool__") and type(value).__name__.startswith("bool")):
        return bool(value)
    raise ValueError(f"expected a bool, got {value!r}")


def _to_int(value: Any) -> int:
    if isinstance(value, str):
        value = _literal(value.strip())
    if isinstance(value, bool):
        raise ValueError(f"expected an int, got the bool {value!r}")
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected an int, got {value!r}") from None
    if as_int != value:
        raise ValueError(f"expected an int, got {value!r}")
    return as_int


def _to_float(value: Any) -> float:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("inf", "+inf", "-inf", "nan"):
            return float(text)
        value = _literal(value.strip())
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _to_shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text in ("()", "[]", ""):
            return ()
        value = _literal(text)
    if getattr(value, "ndim", 0) == 1:  # a numpy array of ints (MXNet accepts np.random.randint(...))
        value = value.tolist()
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return (int(value),)
    if hasattr(value, "__index__") and not isinstance(value, bool):
        return (int(value),)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"expected a tuple of ints like (2, 3), got {value!r}")
    return tuple(_to_int(v) for v in value)


def _to_floats(value: Any) -> tuple[float, ...]:
    if isinstance(value, str):
        value = _literal(value.strip())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (float(value),)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"expected a tuple of numbers, got {value!r}")
    return tuple(_to_float(v) for v in value)


def _to_ints_or_none(value: Any) -> tuple[int | None, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text in ("()", "[]", ""):
            return ()
        value = _literal(text)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return (value,)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"expected a tuple of ints or None like (0, None), got {value!r}")
    return tuple(None if v is None or v == "None" else _to_int(v) for v in value)


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _to_dtype(value: Any) -> str:
    from mxkit.core.dtypes import dtype_name

    return dtype_name(value)


_CONVERTERS = {
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "shape": _to_shape,
    "floats": _to_floats,
    "ints_or_none": _to_ints_or_none,
    "str": _to_str,
    "dtype": _to_dtype,
}


def format_value(value: Any) -> str:
    """The MXNet string form of a typed parameter value: ``(3, 3)``, ``True``, ``None``, ``relu``."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, tuple):
        return "(" + ", ".join(format_value(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, float):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Param:
    """One parameter of an operator.

    Parameters
    ----------
    name : str
        MXNet's parameter name (``axis``, ``keepdims``, ``shape``...).
    kind : str
        ``int``, ``float``, ``bool``, ``shape`` (tuple of ints), ``floats``, ``ints_or_none``
        (slice bounds), ``str`` or ``dtype``.
    default : object
        The value when the parameter is omitted; leave it out for a required parameter.
    optional : bool
        Whether ``None`` is an allowed value (MXNet's ``dmlc::optional``).
    choices : tuple of str, optional
        The allowed values of a ``str`` parameter.
    doc : str
        One line for the generated docstring.
    """

    name: str
    kind: str
    default: Any = _REQUIRED
    optional: bool = False
    choices: tuple[str, ...] | None = None
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def convert(self, value: Any, op_name: str) -> Any:
        """The typed value of ``value`` (a Python value or an MXNet string)."""
        if value is None or (isinstance(value, str) and value.strip() == "None"):
            if self.optional or self.default is None:
                return None
            raise ParamError(f"operator {op_name}: parameter {self.name!r} must not be None; "
                             f"expected a {self.kind}")
        try:
            typed = _CONVERTERS[self.kind](value)
        except (ValueError, TypeError, MXKitError) as exc:
            raise ParamError(f"operator {op_name}: bad value {value!r} for parameter {self.name!r} "
                             f"({self.kind}): {exc}") from None
        if self.choices is not None and typed not in self.choices:
            raise ParamError(f"operator {op_name}: parameter {self.name!r} is {typed!r}; "
                             f"expected one of {', '.join(self.choices)}")
        return typed

    def describe(self) -> str:
        """``name : kind, optional, default=...`` for a docstring."""
        kind = self.kind if self.choices is None else "{" + ", ".join(repr(c) for c in self.choices) + "}"
        default = "required" if self.required else f"default={format_value(self.default)}"
        return f"{self.name} : {kind}, {default}"


@dataclass
class ParamSchema:
    """The typed parameters of one operator, in declaration order."""

    params: tuple[Param, ...] = ()
    #: MXNet registers some operators (the element-wise and broadcast binary ones) without a
    #: parameter parser: they keep any keyword as a free-form attribute and ignore it, so
    #: ``broadcast_maximum(a, b, axis=1)`` runs there. Such a schema drops unknown names.
    ignores_unknown: bool = False
    _by_name: dict[str, Param] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {p.name: p for p in self.params}

    def __iter__(self):
        return iter(self.params)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def parse(self, values: Mapping[str, Any], op_name: str) -> dict[str, Any]:
        """Typed dict of every parameter from ``values`` (Python values or MXNet strings).

        Raises
        ------
        ParamError
            For an unknown name (listing the known ones), a missing required parameter, or a
            value that does not convert.
        """
        out: dict[str, Any] = {}
        for name, value in values.items():
            param = self._by_name.get(name)
            if param is None:
                if name.startswith("__") and name.endswith("__"):
                    continue  # MXNet's free-form attributes (__lr_mult__, __init__...) are not op params
                if self.ignores_unknown:
                    continue
                known = ", ".join(self._by_name) or "none"
                raise ParamError(f"operator {op_name} got an unknown parameter {name!r}={value!r}; "
                                 f"its parameters are: {known}")
            out[name] = param.convert(value, op_name)
        for param in self.params:
            if param.name not in out:
                if param.required:
                    raise ParamError(f"operator {op_name} needs parameter {param.name!r} ({param.kind})")
                out[param.name] = param.default
        return out

    def to_strings(self, typed: Mapping[str, Any], include_defaults: bool = False) -> dict[str, str]:
        """MXNet's string attributes of a typed dict (defaults left out unless asked)."""
        strings: dict[str, str] = {}
        for param in self.params:
            if param.name not in typed:
                continue
            value = typed[param.name]
            if not include_defaults and not param.required and value == param.default \
                    and type(value) is type(param.default):
                continue
            strings[param.name] = format_value(value)
        return strings


def schema(params: Iterable[Param] = (), ignores_unknown: bool = False) -> ParamSchema:
    """A :class:`ParamSchema` of ``params`` (``ignores_unknown``: see :class:`ParamSchema`)."""
    return ParamSchema(tuple(params), ignores_unknown=ignores_unknown)


__all__ = ["Param", "ParamError", "ParamSchema", "format_value", "schema"]
