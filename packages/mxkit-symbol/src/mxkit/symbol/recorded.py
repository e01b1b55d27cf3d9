"""The graph autograd recorded, as a Symbol (MXNet's ``mx.autograd.get_symbol``).

Walks back from an array through the operations recorded under ``autograd.record()``
(:func:`mxkit.ndarray.autograd.recorded_origin`) and builds one symbol node per recorded
operation, with its operator and parameters. Leaves become variables, named as MXNet names
them: ``var<i>`` for the arrays marked with ``attach_grad``/``mark_variables`` and
``null<i>`` for other arrays the operations read; recorded operations are ``node_<i>``.
The numbering is per call, in the order the walk first meets each array (MXNet numbers
over the process).
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray.autograd import AutogradError, recorded_origin
from mxkit.symbol.op import create
from mxkit.symbol.symbol import Group, Symbol, Variable


class _Exporter:
    def __init__(self) -> None:
        self.arrays: dict[int, Symbol] = {}  # id(array) -> its symbol (one output)
        self.nodes: dict[int, Symbol] = {}   # id(recorded operation) -> its node's symbol
        self.keep: list[Any] = []            # the arrays met, so that their ids stay unique
        self.variables = 0
        self.constants = 0
        self.operations = 0

    def symbol_of(self, array: Any) -> Symbol:
        known = self.arrays.get(id(array))
        if known is not None:
            return known
        self.keep.append(array)
        kind, detail = recorded_origin(array)
        if kind == "operator":
            symbol = self._operation(*detail)
        elif kind == "variable":
            symbol = Variable(f"var{self.variables}")
            self.variables += 1
        else:
            symbol = Variable(f"null{self.constants}")
            self.constants += 1
        self.arrays[id(array)] = symbol
        return symbol

    def _operation(self, op: Any, params: dict, inputs: list, index: int, operation: Any) -> Symbol:
        if not hasattr(op, "parse_params"):
            raise AutogradError(f"autograd.get_symbol: the graph contains {getattr(op, 'name', op)!r}, a Python "
                                f"autograd.Function call, which has no Symbol form")
        node = self.nodes.get(id(operation))  # one node per operation, shared by its outputs
        if node is None:
            inputs_symbols = [self.symbol_of(a) for a in inputs]
            given = {k: v for k, v in params.items() if not k.startswith("_")}
            symbolize = params.get("_symbolize")
            try:
                if symbolize is not None:
                    # an operation that knows its own Symbol form (a hybridized Gluon block's call)
                    node = symbolize(inputs_symbols, f"node_{self.operations}")
                else:
                    node = create(op.name, *inputs_symbols, name=f"node_{self.operations}", **given)
            except MXKitError as exc:
                raise AutogradError(f"autograd.get_symbol: the recorded {op.name} cannot be expressed as a "
                                    f"symbol: {exc}") from None
            self.operations += 1
            self.keep.append(operation)
            self.nodes[id(operation)] = node
        return node[index] if len(node.list_outputs()) > 1 else node


def get_symbol(x: Any) -> Symbol:
    """The recorded computation of ``x`` (an NDArray, or a list of them: a grouped symbol).

    Raises
    ------
    AutogradError
        When ``x`` was not computed under ``autograd.record()`` from a marked variable, or the
        graph holds an ``autograd.Function`` call (Python code has no Symbol form).
    """
    heads = list(x) if isinstance(x, (list, tuple)) else [x]
    for head in heads:
        if recorded_origin(head)[0] == "none":
            raise AutogradError("autograd.get_symbol: the array was not computed under autograd.record() from "
                                "an array marked with attach_grad(); record the computation first")
    exporter = _Exporter()
    symbols = [exporter.symbol_of(head) for head in heads]
    return symbols[0] if len(symbols) == 1 else Group(symbols)


__all__ = ["get_symbol"]
