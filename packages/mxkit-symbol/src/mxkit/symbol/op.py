"""Operator symbols: ``mx.sym.<Op>(...)`` for every operator of the registry.

Creating an operator symbol follows MXNet: positional symbols are the inputs in order,
keyword symbols name inputs (``data=``, ``weight=``), every other keyword is a parameter;
inputs not given become new variables named ``<node>_<input>`` (``fc1_weight``), and a
node without ``name=`` is named by the active name manager (``fullyconnected0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray.params import ParamError, format_value
from mxkit.ndarray.registry import OpDef, get_registry
from mxkit.symbol import attribute as _attribute
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.json_legacy import COMPOSE_INITIALIZERS, HIDDEN_KEYS
from mxkit.symbol.symbol import Symbol, SymbolError, Variable, _single_entry, dunder_attrs, make_name


def create(op_name: str, *args: Any, name: str | None = None, attr: Mapping[str, str] | None = None,
           hint: str | None = None, **kwargs: Any) -> Symbol:
    """A new symbol calling operator ``op_name``.

    Parameters
    ----------
    op_name : str
        A registered operator name or alias.
    *args : Symbol
        Inputs in the operator's order.
    name : str, optional
        The node name (default: from the name manager).
    attr : dict of str to str, optional
        Extra attributes (merged over the active :class:`~mxkit.symbol.attribute.AttrScope`).
    hint : str, optional
        The stem of a generated name (default: the lower-case operator name as called).
    **kwargs
        Symbols for named inputs and values for parameters.

    Raises
    ------
    SymbolError
        For a non-symbol positional argument, too many inputs or an unknown input name.
    ParamError
        For a bad parameter (from the registry's schema).
    """
    op = get_registry().get(op_name)
    args, kwargs = _positional_params(op, args, kwargs)
    symbol_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    # An explicit None is kept (as MXNet's "None") where the parameter accepts it: MXNet
    # writes `end=None` of slice_axis into the JSON and refuses a file without it. Elsewhere
    # None means "not given", as in MXNet's generated functions.
    nullable = {p.name for p in op.params if p.optional or p.default is None}
    raw_params = {k: v for k, v in kwargs.items()
                  if not isinstance(v, Symbol) and (v is not None or k in nullable)}
    # MXNet takes its hidden keys (lr_mult=, ctx_group=...) among an operator's keyword
    # arguments as node attributes, not operator parameters
    hidden = {k: raw_params.pop(k) for k in list(raw_params) if k in HIDDEN_KEYS and k not in op.params}
    if "num_args" in op.params and "num_args" not in raw_params and callable(op.num_inputs):
        raw_params["num_args"] = len(args) + len(symbol_kwargs)
    attrs = {k: v if isinstance(v, str) else format_value(_plain(v)) for k, v in raw_params.items()}
    try:
        params = op.parse_params(attrs)
    except ParamError as exc:
        raise ParamError(f"{exc} (creating symbol {name or op_name})") from None
    node_name = make_name(name, hint or op_name.lower())
    input_names = list(op.list_inputs(params)) + list(op.list_aux(params))
    scope_attrs = dunder_attrs(_attribute.current().get(dict(attr) if attr else None), every_key=True)
    scope_attrs |= dunder_attrs(hidden)
    inputs = _collect_inputs(op, node_name, input_names, args, symbol_kwargs, scope_attrs)
    for position, init in COMPOSE_INITIALIZERS.get(op.name, {}).items():
        if position < len(inputs) and inputs[position].node.is_variable:
            inputs[position].node.attrs.setdefault("__init__", init)
    node = Node(op, node_name, scope_attrs | attrs, inputs, params)
    return Symbol([Entry(node, i) for i in range(node.num_outputs())])


def _positional_params(op: OpDef, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Split MXNet's calling convention: input symbols first, then parameters in schema order.

    ``mx.sym.reshape(x, (0, -1))`` passes ``shape`` positionally, as MXNet's generated
    functions allow. A symbol after a parameter is an error.
    """
    count = 0
    while count < len(args) and isinstance(args[count], Symbol):
        count += 1
    if count == len(args):
        return args, kwargs
    if not ("num_args" in op.params or callable(op.num_inputs)):
        # a fixed-arity operator: positions of inputs not given by keyword hold symbols
        input_names = op.list_inputs({p.name: p.default for p in op.params})
        open_inputs = [n for n in input_names[count:] if n not in kwargs]
        if open_inputs:
            raise SymbolError(f"{op.name}: positional argument {count} is {type(args[count]).__name__} "
                              f"{args[count]!r}, but input {open_inputs[0]!r} comes first; positional arguments "
                              f"are the input symbols, then the parameters in order")
    rest = args[count:]
    for i, value in enumerate(rest):
        if isinstance(value, Symbol):
            raise SymbolError(f"{op.name}: positional argument {count + i} is a Symbol after the parameter "
                              f"{rest[0]!r}; input symbols come first, then parameters")
    free = [name for name in op.params.names() if name not in kwargs and name != "num_args"]
    if len(rest) > len(free):
        raise SymbolError(f"{op.name}: got {len(rest)} positional parameters {rest!r} after the input symbols; "
                          f"it takes at most {len(free)}: {', '.join(free) or 'none'}")
    merged = dict(kwargs)
    merged.update(zip(free, rest))
    return args[:count], merged


def _plain(value: Any) -> Any:
    """Python scalars and tuples from numpy scalars and lists, for MXNet's string attributes."""
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, type):  # before .item: numpy scalar types (np.float64) have it unbound
        import numpy

        return numpy.dtype(value).name
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    if hasattr(value, "name") and hasattr(value, "itemsize"):  # a numpy dtype
        return value.name
    return value


def _collect_inputs(op: OpDef, node_name: str, input_names: list[str], args: tuple, named: dict,
                    node_attrs: Mapping[str, str]) -> list[Entry]:
    """The input entries; inputs not given become variables ``<node>_<input>`` that carry the
    node's attributes (``lr_mult=0`` on an operator applies to its weight and bias), as in MXNet."""
    if len(args) > len(input_names):
        raise SymbolError(f"{op.name} {node_name!r}: got {len(args)} input symbols, the operator takes "
                          f"{len(input_names)} ({', '.join(input_names)})")
    unknown = [k for k in named if k not in input_names]
    if unknown:
        listed = ", ".join(repr(k) for k in unknown)
        raise SymbolError(f"{op.name} {node_name!r}: {listed} is not an input; its inputs are: "
                          f"{', '.join(input_names)}")
    inputs: list[Entry] = []
    for position, input_name in enumerate(input_names):
        if position < len(args):
            if input_name in named:
                raise SymbolError(f"{op.name} {node_name!r}: input {input_name!r} given both by position and "
                                  f"by keyword")
            inputs.append(_single_entry(args[position], f"{op.name} {node_name!r} input {input_name!r}"))
        elif input_name in named:
            inputs.append(_single_entry(named[input_name], f"{op.name} {node_name!r} input {input_name!r}"))
        else:
            variable = Variable(f"{node_name}_{input_name}")._outputs[0]
            variable.node.attrs.update(node_attrs)
            inputs.append(variable)
    return inputs


def make_function(op_name: str):
    """The ``mx.sym.<op_name>`` function, with the operator's generated docstring."""
    op = get_registry().get(op_name)

    def function(*args: Any, name: str | None = None, attr: Mapping[str, str] | None = None, **kwargs: Any):
        return create(op_name, *args, name=name, attr=attr, **kwargs)

    function.__name__ = op_name
    function.__qualname__ = op_name
    function.__doc__ = op.docstring().replace("NDArray", "Symbol")
    return function


def operator_function(op_name: str):
    """``make_function`` for a registered name, or ``None``."""
    try:
        if op_name not in get_registry():
            return None
    except MXKitError:
        return None
    return make_function(op_name)


__all__ = ["create", "make_function", "operator_function"]
