"""Writes ``src/mxkit/symbol/monitor_names.py``: the operators whose inputs MXNet 1.9.1's monitor
and op hook name ``input0, input1...`` rather than by argument.

MXNet names a node's inputs, when it reports them (``monitor_all=True``), by the operator's
``FListInputNames`` attribute, and by position where the operator registers none
(``Activation``, ``relu``, ``Reshape``, every scalar operator...). That attribute lives in C++
registrations, often inside macros, so this script reads MXNet's sources:

    python tools/mxnet_monitor_names.py <mxnet-1.9.1>/src

It expands the registration macros (a function-like macro registers an operator when its body
has ``NNVM_REGISTER_OP`` or another such macro; an object-like macro may add the attribute),
follows ``add_alias`` and ``MXNET_ADD_SPARSE_OP_ALIAS`` to the operator they name, and counts
every operator of the legacy ``MXNET_REGISTER_OP_PROPERTY`` interface as naming its inputs (its
adapter registers the attribute for all). Only operators that mxkit defines are written.
Names made by token pasting (``_random_pdf_##name``) are not resolved; mxkit keeps argument
names for those.
"""

from __future__ import annotations

import os
import re
import sys

_FUNCTION_MACRO = re.compile(r"#define\s+(\w+)\s*\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)")
_OBJECT_MACRO = re.compile(r"#define\s+(\w+)[ \t]*((?:[^\n]*\\\n)*[^\n]*)")
_ANY_DEFINE = re.compile(r"#define\s+\w+(?:[^\n]*\\\n)*[^\n]*")


def _sources(root: str) -> list[str]:
    texts = []
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith((".cc", ".h", ".cu", ".cuh")):
                with open(os.path.join(folder, name), errors="replace") as f:
                    text = f.read()
                text = re.sub(r"//[^\n]*", "", text)
                texts.append(re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    return texts


def _closing(text: str, start: int) -> int:
    """Index of the ``)`` that closes the ``(`` at or after ``start``."""
    depth = 0
    for index in range(text.index("(", start), len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _statement_end(text: str, start: int) -> int:
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif char == ";" and depth <= 0:
            return index
    return len(text)


def names_inputs(root: str) -> dict[str, bool]:
    """Every operator name found, mapped to whether it registers ``FListInputNames``."""
    texts = _sources(root)
    macros: dict[str, str] = {}
    attribute_macros: set[str] = set()
    for text in texts:
        for match in _FUNCTION_MACRO.finditer(text):
            macros[match.group(1)] = match.group(3)
        for match in _OBJECT_MACRO.finditer(text):
            if "FListInputNames" in match.group(2) and match.group(1) not in macros:
                attribute_macros.add(match.group(1))

    def expand(name: str, seen: tuple[str, ...] = ()) -> tuple[bool, bool]:
        body = macros.get(name, "")
        registers, sets = "NNVM_REGISTER_OP" in body, "FListInputNames" in body
        for inner in re.findall(r"\b([A-Z_][A-Z0-9_]+)\s*\(", body):
            if inner in macros and inner not in seen and inner != name:
                inner_registers, inner_sets = expand(inner, (*seen, name))
                if inner_registers:
                    registers, sets = True, sets or inner_sets
        return registers, sets

    registering = {name: expand(name) for name in macros}
    registering = {name: value[1] for name, value in registering.items() if value[0]}
    registering["NNVM_REGISTER_OP"] = False
    call = re.compile(r"\b(" + "|".join(sorted(registering, key=len, reverse=True)) + r")\s*\(\s*(\w+)")
    found: dict[str, bool] = {}
    aliases: dict[str, str] = {}
    for text in texts:
        body = _ANY_DEFINE.sub("", text)
        for match in re.finditer(r"MXNET_REGISTER_OP_PROPERTY\(\s*(\w+)", body):
            found[match.group(1)] = True
        for match in call.finditer(body):
            macro, name = match.groups()
            statement = body[match.start():_statement_end(body, _closing(body, match.start()))]
            sets = registering[macro] or "FListInputNames" in statement or any(
                re.search(rf"\b{attribute}\b", statement) for attribute in attribute_macros)
            found[name] = found.get(name, False) or sets
            for alias in re.findall(r"\.add_alias\(\s*\"(\w+)\"", statement):
                aliases[alias] = name
            if "MXNET_ADD_SPARSE_OP_ALIAS" in statement or "MXNET_ADD_SPARSE_OP_ALIAS" in macros.get(macro, ""):
                aliases["_sparse_" + name] = name
    for alias, name in aliases.items():
        found[alias] = found.get(name, False)
    return found


def main() -> None:
    from mxkit.ndarray.registry import get_registry

    if len(sys.argv) != 2:
        raise SystemExit("usage: python tools/mxnet_monitor_names.py <mxnet-1.9.1>/src")
    found = names_inputs(sys.argv[1])
    positional = sorted(name for name in get_registry().names() if found.get(name) is False)
    lines = "\n".join(f'    "{name}",' for name in positional)
    module = f'''"""The operators whose inputs MXNet 1.9.1's monitor and op hook call ``input0, input1...``.

MXNet names a reported input ``<node>_<name>`` with the names of the operator's
``FListInputNames``, and ``<node>_input<i>`` for operators that register none. Generated from
MXNet 1.9.1's C++ sources by ``tools/mxnet_monitor_names.py`` (do not edit by hand); the
operators of mxkit that are not listed name their inputs by argument, as MXNet's do.
"""

from __future__ import annotations

from typing import Any

POSITIONAL_INPUT_OPERATORS = frozenset({{
{lines}
}})


def monitor_input_names(op: Any, params: dict) -> list[str]:
    """The names MXNet gives the inputs of a node of ``op`` when it reports them.

    Parameters
    ----------
    op : OpDef
        The node's operator.
    params : dict
        The node's parameters (variadic operators' argument counts).

    Returns
    -------
    list of str
        ``input0, input1...`` for the operators of :data:`POSITIONAL_INPUT_OPERATORS`, else the
        operator's arguments followed by its auxiliary states (``data``, ``gamma``, ...,
        ``moving_mean``).
    """
    names = list(op.list_inputs(params)) + list(op.list_aux(params))
    if op.name in POSITIONAL_INPUT_OPERATORS:
        return [f"input{{i}}" for i in range(len(names))]
    return names


__all__ = ["POSITIONAL_INPUT_OPERATORS", "monitor_input_names"]
'''
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "mxkit", "symbol",
                          "monitor_names.py")
    with open(target, "w") as f:
        f.write(module)
    print(f"{len(positional)} operators name their inputs by position; wrote {os.path.normpath(target)}")


if __name__ == "__main__":
    main()
