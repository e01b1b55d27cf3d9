"""The expression program of a fused elementwise node, and its renderings.

A fused node (operator ``_FusedElemwise``) computes one elementwise expression over its
inputs in one pass. The expression is a *program*: a JSON object that every backend can
translate (numexpr on CPU, a generated sequence of ``xp`` ufunc calls, one
``cupy.ElementwiseKernel`` on CUDA)::

    {"dtype": "float32",
     "num_inputs": 2,
     "steps": [["mul", "x0", "x1"],
               ["add", "v0", 1.0]]}

- ``dtype`` is the dtype of every input, every step and the output (a floating type);
- ``steps`` is straight-line code in execution order: ``[primitive, operand, ...]``;
- an operand is ``"x<i>"`` (input ``i``), ``"v<k>"`` (the value of step ``k < current``)
  or a JSON number (a constant, converted to ``dtype`` before use);
- the value of the last step is the output. Inputs broadcast to the output's shape with
  numpy's rules (aligned at the right); every step's value has the output's shape.

The primitives (:data:`PRIMITIVES`) are the ones C has as operators or ``<math.h>``
functions, so a backend renders a program with a table lookup per step:

- binary arithmetic ``add sub mul div power maximum minimum hypot``; ``logaddexp``;
- comparisons ``equal not_equal greater greater_equal lesser lesser_equal`` and
  ``logical_and logical_or logical_xor``: 1 where true, else 0, in ``dtype`` (MXNet's);
- unary math ``negative abs sign exp expm1 log log10 log2 log1p sqrt cbrt sin cos tan
  arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor ceil rint trunc``;
- ``where(cond, x, y)`` (``x`` where ``cond != 0``), ``clip(x, lo, hi)`` with constant
  bounds, and ``copy(x)``.

:func:`render_c_expression` gives the whole program as one C expression over given
variable names (``"((a * b) + 1.0f)"``), :func:`render_c_body` the same as statements
(one local per step, no repeated subexpressions) for a kernel body, and
:func:`render_numexpr` the numexpr string. C names are C99's ``<math.h>`` (CUDA
overloads them for float): ``maximum``/``minimum``/``clip`` render to ``fmax``/``fmin``,
which (unlike numpy) return the other operand when one is NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mxkit.core.errors import MXKitError

FLOAT_DTYPES = ("float32", "float64")


class FusedProgramError(MXKitError, ValueError):
    """A fused-elementwise program that is malformed (names the offending step)."""


@dataclass(frozen=True)
class Primitive:
    """One primitive: its arity, numpy ufunc, numexpr template (None: unsupported) and C template.

    Templates use ``{0}``, ``{1}``... for the rendered operands and ``{one}``/``{zero}``
    for the constants 1 and 0 of the program's dtype.
    """

    arity: int
    ufunc: str | None
    numexpr: str | None
    c: str


def _compare(symbol: str) -> tuple[str, str]:
    return (f"where({{0}} {symbol} {{1}}, {{one}}, {{zero}})", f"(({{0}} {symbol} {{1}}) ? {{one}} : {{zero}})")


PRIMITIVES: dict[str, Primitive] = {
    "add": Primitive(2, "add", "({0} + {1})", "({0} + {1})"),
    "sub": Primitive(2, "subtract", "({0} - {1})", "({0} - {1})"),
    "mul": Primitive(2, "multiply", "({0} * {1})", "({0} * {1})"),
    "div": Primitive(2, "true_divide", "({0} / {1})", "({0} / {1})"),
    "power": Primitive(2, "power", "({0} ** {1})", "pow({0}, {1})"),
    "maximum": Primitive(2, "maximum", "maximum({0}, {1})", "fmax({0}, {1})"),
    "minimum": Primitive(2, "minimum", "minimum({0}, {1})", "fmin({0}, {1})"),
    "hypot": Primitive(2, "hypot", "hypot({0}, {1})", "hypot({0}, {1})"),
    "logaddexp": Primitive(2, "logaddexp", None,
                           "(({0}) > ({1}) ? ({0}) + log1p(exp(({1}) - ({0}))) : ({1}) + log1p(exp(({0}) - ({1}))))"),
    "equal": Primitive(2, "equal", *_compare("==")),
    "not_equal": Primitive(2, "not_equal", *_compare("!=")),
    "greater": Primitive(2, "greater", *_compare(">")),
    "greater_equal": Primitive(2, "greater_equal", *_compare(">=")),
    "lesser": Primitive(2, "less", *_compare("<")),
    "lesser_equal": Primitive(2, "less_equal", *_compare("<=")),
    "logical_and": Primitive(2, "logical_and", "where(({0} != 0) & ({1} != 0), {one}, {zero})",
                             "((({0}) != 0 && ({1}) != 0) ? {one} : {zero})"),
    "logical_or": Primitive(2, "logical_or", "where(({0} != 0) | ({1} != 0), {one}, {zero})",
                            "((({0}) != 0 || ({1}) != 0) ? {one} : {zero})"),
    "logical_xor": Primitive(2, "logical_xor", "where(({0} != 0) ^ ({1} != 0), {one}, {zero})",
                             "((({0}) != 0) != (({1}) != 0) ? {one} : {zero})"),
    "negative": Primitive(1, "negative", "(-{0})", "(-{0})"),
    "abs": Primitive(1, "absolute", "abs({0})", "fabs({0})"),
    "sign": Primitive(1, "sign", "sign({0})", "(({0}) > 0 ? {one} : (({0}) < 0 ? -{one} : ({0})))"),
    "copy": Primitive(1, None, "{0}", "{0}"),
    "where": Primitive(3, None, "where({0} != 0, {1}, {2})", "(({0}) != 0 ? {1} : {2})"),
    "clip": Primitive(3, "clip", "where({0} < {1}, {1}, where({0} > {2}, {2}, {0}))", "fmin(fmax({0}, {1}), {2})"),
}
# unary functions with one name in numpy, numexpr (where it has them) and C
for _name, _c_name, _in_numexpr in (
        ("exp", "exp", True), ("expm1", "expm1", True), ("log", "log", True), ("log10", "log10", True),
        ("log2", "log2", True), ("log1p", "log1p", True), ("sqrt", "sqrt", True), ("cbrt", "cbrt", False),
        ("sin", "sin", True), ("cos", "cos", True), ("tan", "tan", True), ("arcsin", "asin", True),
        ("arccos", "acos", True), ("arctan", "atan", True), ("sinh", "sinh", True), ("cosh", "cosh", True),
        ("tanh", "tanh", True), ("arcsinh", "asinh", True), ("arccosh", "acosh", True),
        ("arctanh", "atanh", True), ("floor", "floor", True), ("ceil", "ceil", True), ("rint", "rint", False),
        ("trunc", "trunc", True)):
    PRIMITIVES[_name] = Primitive(1, _name, f"{_name}({{0}})" if _in_numexpr else None, f"{_c_name}({{0}})")


@dataclass(frozen=True)
class Program:
    """A parsed, validated program (see the module docstring)."""

    dtype: str
    num_inputs: int
    steps: tuple[tuple[Any, ...], ...]

    def to_json(self) -> str:
        """The canonical JSON text (the operator parameter ``expression``)."""
        return json.dumps({"dtype": self.dtype, "num_inputs": self.num_inputs,
                           "steps": [list(s) for s in self.steps]}, separators=(",", ":"))

    def uses(self) -> list[int]:
        """Per step, how many later operand slots read its value."""
        counts = [0] * len(self.steps)
        for step in self.steps:
            for operand in step[1:]:
                if isinstance(operand, str) and operand[0] == "v":
                    counts[int(operand[1:])] += 1
        return counts


def _check_operand(operand: Any, position: int, num_inputs: int, where: str) -> Any:
    if isinstance(operand, bool) or not isinstance(operand, int | float | str):
        raise FusedProgramError(f"{where}: operand {operand!r} must be 'x<i>', 'v<k>' or a number")
    if isinstance(operand, str):
        kind, digits = operand[:1], operand[1:]
        if kind not in ("x", "v") or not digits.isdigit():
            raise FusedProgramError(f"{where}: operand {operand!r} must be 'x<i>' (an input) or 'v<k>' (a step)")
        index = int(digits)
        limit = num_inputs if kind == "x" else position
        if index >= limit:
            what = (f"the program has {num_inputs} inputs" if kind == "x"
                    else f"only steps 0..{position - 1} come before")
            raise FusedProgramError(f"{where}: operand {operand!r} is out of range ({what})")
        return operand
    return float(operand)


@lru_cache(maxsize=1024)
def parse_program(text: str) -> Program:
    """The :class:`Program` of a JSON text, checked.

    Raises
    ------
    FusedProgramError
        For malformed JSON, an unknown primitive, a wrong operand count or reference.
    """
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise FusedProgramError(f"fused program is not valid JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(raw, dict) or not {"dtype", "num_inputs", "steps"} <= set(raw):
        raise FusedProgramError(f"fused program must be an object with dtype, num_inputs and steps, got {text[:80]!r}")
    dtype, num_inputs, raw_steps = raw["dtype"], raw["num_inputs"], raw["steps"]
    if dtype not in FLOAT_DTYPES:
        raise FusedProgramError(f"fused program dtype {dtype!r} is not supported; expected one of "
                                f"{', '.join(FLOAT_DTYPES)}")
    if not isinstance(num_inputs, int) or num_inputs < 1:
        raise FusedProgramError(f"fused program num_inputs must be a positive int, got {num_inputs!r}")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise FusedProgramError("fused program has no steps; it needs at least one")
    steps = []
    for position, step in enumerate(raw_steps):
        where = f"fused program step {position} {step!r}"
        if not isinstance(step, list) or not step or step[0] not in PRIMITIVES:
            raise FusedProgramError(f"{where}: expected [primitive, operands...] with a primitive among "
                                    f"{', '.join(sorted(PRIMITIVES))}")
        arity = PRIMITIVES[step[0]].arity
        if len(step) - 1 != arity:
            raise FusedProgramError(f"{where}: {step[0]} takes {arity} operands, got {len(step) - 1}")
        steps.append((step[0], *(_check_operand(o, position, num_inputs, where) for o in step[1:])))
    return Program(dtype, num_inputs, tuple(steps))


# ---- renderings -----------------------------------------------------------------------------

def _c_constant(value: float, dtype: str) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    if dtype == "float32":
        import numpy as np

        text = repr(float(np.float32(value)))
        return f"{text}f" if ("." in text or "e" in text) else f"{text}.0f"
    text = repr(float(value))
    return text if ("." in text or "e" in text) else f"{text}.0"


def _render(program: Program, template_of, operand_text) -> list[str]:
    """Each step's rendering with single-use operands inlined (the last one is the output)."""
    rendered: list[str] = []
    for step in program.steps:
        template = template_of(step[0])
        args = [operand_text(o, rendered) for o in step[1:]]
        rendered.append(template.format(*args, one=operand_text(1.0, rendered), zero=operand_text(0.0, rendered)))
    return rendered


def render_c_expression(program: Program | str, names: Sequence[str]) -> str:
    """The program as one C expression over the input variables ``names``.

    Parameters
    ----------
    program : Program or str
        The program or its JSON text.
    names : sequence of str
        The C variable name of each input, in order.

    Returns
    -------
    str
        e.g. ``"((a * b) + 1.0f)"`` for ``[["mul","x0","x1"],["add","v0",1]]`` in float32.
        A value used twice is written twice; :func:`render_c_body` avoids that.
    """
    program = parse_program(program) if isinstance(program, str) else program
    _check_names(program, names)

    def operand(o: Any, rendered: list[str]) -> str:
        if isinstance(o, float):
            return _c_constant(o, program.dtype)
        return names[int(o[1:])] if o[0] == "x" else rendered[int(o[1:])]

    return _render(program, lambda p: PRIMITIVES[p].c, operand)[-1]


def render_c_body(program: Program | str, names: Sequence[str], out: str = "out", ctype: str | None = None) -> str:
    """The program as C statements: one local per step, then ``out = <last>;``.

    For a kernel body (``cupy.ElementwiseKernel``'s ``operation``): values used several
    times are computed once.
    """
    program = parse_program(program) if isinstance(program, str) else program
    _check_names(program, names)
    ctype = ctype or ("float" if program.dtype == "float32" else "double")
    lines = []

    def operand(o: Any) -> str:
        if isinstance(o, float):
            return _c_constant(o, program.dtype)
        return names[int(o[1:])] if o[0] == "x" else f"_v{o[1:]}"

    for k, step in enumerate(program.steps):
        args = [operand(o) for o in step[1:]]
        text = PRIMITIVES[step[0]].c.format(*args, one=operand(1.0), zero=operand(0.0))
        lines.append(f"{ctype} _v{k} = {text};")
    lines.append(f"{out} = _v{len(program.steps) - 1};")
    return "\n".join(lines)


def _check_names(program: Program, names: Sequence[str]) -> None:
    if len(names) != program.num_inputs:
        raise FusedProgramError(f"the program has {program.num_inputs} inputs, got {len(names)} names: "
                                f"{list(names)}")


def numexpr_supported(program: Program) -> bool:
    """Whether every primitive of the program has a numexpr rendering."""
    return all(PRIMITIVES[step[0]].numexpr is not None for step in program.steps)


def render_numexpr(program: Program) -> tuple[str, dict[str, float]]:
    """The numexpr string over inputs ``x0, x1...`` and its constants (name to value).

    Constants are variables (``c0, c1...``) so that the caller passes them as scalars of
    the program's dtype: numexpr would compute with a Python float literal in float64.
    """
    constants: dict[float, str] = {}

    def operand(o: Any, rendered: list[str]) -> str:
        if isinstance(o, float):
            key = o if not math.isnan(o) else "nan"
            if key not in constants:
                constants[key] = f"c{len(constants)}"
            return constants[key]
        return o if o[0] == "x" else rendered[int(o[1:])]

    text = _render(program, lambda p: PRIMITIVES[p].numexpr, operand)[-1]
    return text, {name: (float("nan") if key == "nan" else key) for key, name in constants.items()}


__all__ = ["FLOAT_DTYPES", "FusedProgramError", "PRIMITIVES", "Primitive", "Program", "numexpr_supported",
           "parse_program", "render_c_body", "render_c_expression", "render_numexpr"]
