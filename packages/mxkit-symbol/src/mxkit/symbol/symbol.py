"""The Symbol: a handle on one or more outputs of a graph (MXNet 1.x ``mx.sym.Symbol``).

Symbols are built by calling operators on other symbols (``mx.sym.FullyConnected(data,
num_hidden=10, name="fc1")``), combined with arithmetic, grouped, indexed and composed;
nothing is computed until the symbol is bound to arrays (:mod:`mxkit.symbol.executor`).
"""

from __future__ import annotations

import copy as _copy
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.symbol import attribute as _attribute
from mxkit.symbol import name as _name
from mxkit.symbol.graph import Entry, Node, aux_variables, topo_order


class SymbolError(MXKitError, ValueError):
    """A symbol was built, indexed or composed in a way MXNet does not allow."""


class NotImplementedForSymbol(SymbolError):
    """An NDArray-only operation was applied to a Symbol (MXNet's error of that name).

    ``bool(symbol)`` raises it: a symbol's value is unknown until an executor runs it.
    """

    def __init__(self, function: Any, alias: str | None = None, *args: Any):
        super().__init__()
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = tuple(str(type(a)) for a in args)

    def __str__(self) -> str:
        name = self.alias or self.function
        return (f"Function {name} (namely operator \"{self.function}\") is not implemented for Symbol: its "
                f"value is unknown until it runs; compare symbols with 'is', or evaluate them")


class Symbol:
    """One or more outputs of a computation graph.

    Symbols are immutable: composition, grouping and indexing make new symbols that share
    the unchanged nodes. Build them with :func:`Variable`, the operator functions of
    :mod:`mxkit.symbol`, arithmetic, :func:`Group` and :func:`load`.
    """

    __slots__ = ("__weakref__", "_outputs")

    def __init__(self, outputs: Sequence[Entry]) -> None:
        self._outputs = list(outputs)

    # -- identity -------------------------------------------------------------------------

    @property
    def name(self) -> str | None:
        """The name of the node of a single-output symbol; ``None`` for a group."""
        if len(self._outputs) != 1:
            return None
        return self._outputs[0].node.name

    def __reduce__(self) -> tuple:
        # pickle (as MXNet's Symbol): the graph as MXNet JSON
        from mxkit.symbol import load_json

        return (load_json, (self.tojson(),))

    def __repr__(self) -> str:
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return "<Symbol group [" + ", ".join(self.list_outputs()) + "]>"

    def __copy__(self) -> Symbol:
        return self._deep_copy()

    def __deepcopy__(self, memo: dict) -> Symbol:
        return self._deep_copy()

    def _deep_copy(self, replace: Mapping[str, Entry] | None = None) -> Symbol:
        """A copy with new nodes; variables named in ``replace`` become the given entries."""
        replace = replace or {}
        mapping: dict[int, Node] = {}
        for node in topo_order(self._outputs):
            if node.is_variable and node.name in replace:
                continue
            inputs = [_map_entry(e, mapping, replace) for e in node.inputs]
            mapping[id(node)] = Node(node.op, node.name, node.attrs, inputs, node.params)
        return Symbol([_map_entry(e, mapping, replace) for e in self._outputs])

    # -- structure ------------------------------------------------------------------------

    def _order(self) -> list[Node]:
        return topo_order(self._outputs)

    def list_arguments(self) -> list[str]:
        """Names of the variables that are arguments (inputs and parameters), in graph order."""
        order = self._order()
        aux = aux_variables(order)
        return [n.name for n in order if n.is_variable and id(n) not in aux]

    def list_auxiliary_states(self) -> list[str]:
        """Names of the variables used as auxiliary states (BatchNorm's moving statistics)."""
        order = self._order()
        aux = aux_variables(order)
        return [n.name for n in order if n.is_variable and id(n) in aux]

    def list_inputs(self) -> list[str]:
        """Names of every variable: arguments and auxiliary states, in graph order."""
        return [n.name for n in self._order() if n.is_variable]

    def list_outputs(self) -> list[str]:
        """Names of the outputs (``fc1_output``; a variable's own name)."""
        return [entry.node.output_names()[entry.index] for entry in self._outputs]

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self):
        return (Symbol([entry]) for entry in self._outputs)

    def __getitem__(self, index: int | str | slice) -> Symbol:
        """Output ``index`` (an int, or an output name such as ``'fc1_output'``)."""
        if isinstance(index, slice):
            return Symbol(self._outputs[index])
        if isinstance(index, str):
            names = self.list_outputs()
            matches = [i for i, n in enumerate(names) if n == index]
            if not matches:
                raise SymbolError(f"symbol has no output named {index!r}; its outputs are: {', '.join(names)}")
            if len(matches) > 1:
                raise SymbolError(f"output name {index!r} is ambiguous (outputs {matches}); index by number")
            return Symbol([self._outputs[matches[0]]])
        if not isinstance(index, numbers.Integral) or isinstance(index, bool):
            raise SymbolError(f"a symbol is indexed by an int or an output name, got {index!r}")
        count = len(self._outputs)
        if not -count <= index < count:
            raise SymbolError(f"output index {index} is out of range for a symbol with {count} outputs "
                              f"({', '.join(self.list_outputs())})")
        return Symbol([self._outputs[index]])

    def get_internals(self) -> Symbol:
        """A group of every output of every node, in graph order (for feature extraction)."""
        entries = [Entry(node, i) for node in self._order() for i in range(node.num_outputs())]
        return Symbol(entries)

    def get_children(self) -> Symbol | None:
        """A group of the inputs of this symbol's node(s), each node once (so the outputs of
        one multi-output node give its inputs once, as in MXNet); ``None`` for a variable."""
        nodes = list({id(out.node): out.node for out in self._outputs}.values())
        entries = [e for node in nodes for e in node.inputs]
        return Symbol(entries) if entries else None

    # -- attributes -----------------------------------------------------------------------

    def attr(self, key: str) -> str | None:
        """The string attribute ``key`` of this single-output symbol's node, or ``None``.

        A key is found in its stored dunder form too (``lr_mult`` as ``__lr_mult__``).
        """
        node = self._single_node("attr")
        if key in node.attrs:
            return node.attrs[key]
        return node.attrs.get(f"__{key}__")

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        """The attributes of this symbol's node (``recursive``: of every node, keyed
        ``node_name$key``, as MXNet 0.x did; prefer :meth:`attr_dict`).

        A hidden key is listed in its stored form and by its plain name (``__lr_mult__``
        and ``lr_mult``), as MXNet lists it.
        """
        if recursive:
            return {f"{n.name}${k}": v for n in self._order() for k, v in _listed(n.attrs).items()}
        return _listed(self._single_node("list_attr").attrs)

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """Node name to its attributes (hidden keys also by their plain names), for every
        node with attributes."""
        return {n.name: _listed(n.attrs) for n in self._order() if n.attrs}

    def _set_attr(self, **attrs: str) -> None:
        """Set string attributes on this symbol's node (MXNet's ``_set_attr``)."""
        node = self._single_node("_set_attr")
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise SymbolError(f"_set_attr: attribute {key}={value!r} must be a string")
            node.attrs[key] = value

    def _single_node(self, what: str) -> Node:
        if len(self._outputs) != 1:
            raise SymbolError(f"{what} needs a single-output symbol, this one has {len(self._outputs)} outputs "
                              f"({', '.join(self.list_outputs())}); index it first")
        return self._outputs[0].node

    # -- composition ----------------------------------------------------------------------

    def __call__(self, *args: Symbol, **kwargs: Symbol) -> Symbol:
        """A copy with argument variables replaced by symbols (MXNet's composition).

        Positional symbols replace the arguments in :meth:`list_arguments` order; keyword
        ones replace the argument of that name. ``name=`` is accepted and ignored for
        single-output results only when it matches (MXNet renames; mxkit keeps names).
        """
        kwargs.pop("name", None)
        arguments = self.list_arguments()
        if len(args) > len(arguments):
            raise SymbolError(f"composition got {len(args)} positional symbols for {len(arguments)} arguments "
                              f"({', '.join(arguments)})")
        replace: dict[str, Entry] = {}
        for arg_name, value in list(zip(arguments, args)) + list(kwargs.items()):
            if arg_name not in arguments:
                raise SymbolError(f"composition: {arg_name!r} is not an argument of this symbol; its arguments "
                                  f"are: {', '.join(arguments)}")
            replace[arg_name] = _single_entry(value, f"composition argument {arg_name!r}")
        return self._deep_copy(replace)

    # -- fluent operator methods (MXNet's ``sym.reshape(...)``, ``sym.sum(axis=1)``...) -----

    def __getattr__(self, name: str) -> Any:
        operator = _FLUENT.get(name)
        if operator is None:
            raise AttributeError(f"'Symbol' object has no attribute {name!r}")
        from mxkit.symbol.op import create

        def method(*args: Any, **kwargs: Any) -> Symbol:
            # nodes are named after the method, as MXNet's fluent methods call the alias (flip0, not reverse0)
            return create(operator, self, *args, hint=name.lower(), **kwargs)

        method.__name__ = name
        method.__doc__ = f"``mx.sym.{operator}(self, ...)``."
        return method

    def _gen_atomic_symbol(self) -> Symbol:
        """The operator of this symbol's head node alone, with its parameters and attributes and
        new variables for its inputs (MXNet's ``MXGenAtomicSymbolFromSymbol``)."""
        from mxkit.symbol.op import create

        node = self._outputs[0].node
        if node.op is None:
            raise SymbolError(f"_gen_atomic_symbol: {node.name!r} is a variable, not an operator node")
        given = {k: v for k, v in node.attrs.items() if not (k.startswith("__") and k.endswith("__"))}
        hidden = {k: v for k, v in node.attrs.items() if k not in given}
        return create(node.op.name, name=node.name, attr=hidden or None, **given)

    def split_v2(self, indices_or_sections: Any, axis: int = 0, squeeze_axis: bool = False,
                 **kwargs: Any) -> Any:
        """``mx.sym.split_v2(self, ...)``: split at indices or into equal sections."""
        from mxkit.symbol.choosers import split_v2

        return split_v2(self, indices_or_sections, axis=axis, squeeze_axis=squeeze_axis, **kwargs)

    def astype(self, dtype: Any, name: str | None = None) -> Symbol:
        """``mx.sym.Cast(self, dtype=dtype)``."""
        from mxkit.symbol.op import create

        return create("Cast", self, dtype=dtype, name=name)

    # -- arithmetic -----------------------------------------------------------------------

    def _binary(self, other: Any, op: str, scalar_op: str, reverse_scalar_op: str | None = None,
                reverse: bool = False) -> Symbol:
        from mxkit.symbol.op import create

        # MXNet names these nodes after its internal operators: _plus0, _mulscalar0, _rdivscalar0
        if isinstance(other, Symbol):
            lhs, rhs = (other, self) if reverse else (self, other)
            return create(_SYMBOL_OPS[op], lhs, rhs, hint=op)
        if isinstance(other, numbers.Number) and not isinstance(other, bool | complex):
            name = reverse_scalar_op if reverse and reverse_scalar_op is not None else scalar_op
            return create(name, self, scalar=_python_number(other), hint=name.replace("_scalar", "scalar"))
        return NotImplemented

    def __add__(self, other: Any) -> Symbol:
        return self._binary(other, "_plus", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, other: Any) -> Symbol:
        return self._binary(other, "_minus", "_minus_scalar")

    def __rsub__(self, other: Any) -> Symbol:
        return self._binary(other, "_minus", "_minus_scalar", "_rminus_scalar", reverse=True)

    def __mul__(self, other: Any) -> Symbol:
        return self._binary(other, "_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Symbol:
        return self._binary(other, "_div", "_div_scalar")

    def __rtruediv__(self, other: Any) -> Symbol:
        return self._binary(other, "_div", "_div_scalar", "_rdiv_scalar", reverse=True)

    def __mod__(self, other: Any) -> Symbol:
        return self._binary(other, "_mod", "_mod_scalar")

    def __rmod__(self, other: Any) -> Symbol:
        return self._binary(other, "_mod", "_mod_scalar", "_rmod_scalar", reverse=True)

    def __pow__(self, other: Any) -> Symbol:
        return self._binary(other, "_power", "_power_scalar")

    def __rpow__(self, other: Any) -> Symbol:
        return self._binary(other, "_power", "_power_scalar", "_rpower_scalar", reverse=True)

    def __abs__(self) -> Symbol:
        from mxkit.symbol.op import create

        return create("abs", self)

    def __neg__(self) -> Symbol:
        return self._binary(-1.0, "_mul", "_mul_scalar")

    def __gt__(self, other: Any) -> Symbol:
        return self._binary(other, "_greater", "_greater_scalar")

    def __ge__(self, other: Any) -> Symbol:
        return self._binary(other, "_greater_equal", "_greater_equal_scalar")

    def __lt__(self, other: Any) -> Symbol:
        return self._binary(other, "_lesser", "_lesser_scalar")

    def __le__(self, other: Any) -> Symbol:
        return self._binary(other, "_lesser_equal", "_lesser_equal_scalar")

    def __eq__(self, other: Any) -> Symbol:  # type: ignore[override]
        # MXNet: an elementwise comparison node, not identity (``is`` compares symbols)
        return self._binary(other, "_equal", "_equal_scalar")

    def __ne__(self, other: Any) -> Symbol:  # type: ignore[override]
        return self._binary(other, "_not_equal", "_not_equal_scalar")

    # symbols stay usable as dict keys and set members, by identity
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise NotImplementedForSymbol(self.__bool__, "bool")

    # -- inference ------------------------------------------------------------------------

    def infer_shape(self, *args: Any, **kwargs: Any):
        """Shapes of arguments, outputs and auxiliary states from some known shapes.

        Parameters
        ----------
        *args : tuple of int
            Shapes in :meth:`list_arguments` order (``None`` for unknown).
        **kwargs : tuple of int
            Shapes by argument name.

        Returns
        -------
        (arg_shapes, out_shapes, aux_shapes)
            Lists of tuples; ``(None, None, None)`` when the known shapes do not determine all.

        Raises
        ------
        ShapeError
            On an inconsistency, naming the node, the operator and the conflicting shapes.
        """
        from mxkit.symbol.infer import infer_shape

        return infer_shape(self, args, kwargs, partial=False)

    def infer_shape_partial(self, *args: Any, **kwargs: Any):
        """As :meth:`infer_shape`, but unknown shapes are ``()`` instead of failing the whole."""
        from mxkit.symbol.infer import infer_shape

        return infer_shape(self, args, kwargs, partial=True)

    def infer_type_partial(self, *args: Any, **kwargs: Any):
        """As :meth:`infer_type`, but dtypes not inferred are ``None`` instead of failing the whole."""
        from mxkit.symbol.infer import infer_type

        return infer_type(self, args, kwargs, partial=True)

    def infer_type(self, *args: Any, **kwargs: Any):
        """dtypes (numpy dtypes) of arguments, outputs and auxiliary states from some known ones.

        Returns ``(None, None, None)`` when the given dtypes do not determine all.
        """
        from mxkit.symbol.infer import infer_type

        return infer_type(self, args, kwargs)

    # -- serialization --------------------------------------------------------------------

    def tojson(self) -> str:
        """The graph as MXNet 1.x JSON (``nodes``, ``arg_nodes``, ``node_row_ptr``, ``heads``)."""
        from mxkit.symbol.json_format import to_json

        return to_json(self)

    def save(self, fname: str) -> None:
        """Write :meth:`tojson` to ``fname`` (``model-symbol.json``), durably: the old file
        stays whole until the new one is complete (:mod:`mxkit.core.files`)."""
        from mxkit.core.files import atomic_write

        atomic_write(fname, self.tojson())

    # -- execution ------------------------------------------------------------------------

    def simple_bind(self, ctx: Any = None, grad_req: Any = "write", type_dict: Any = None, memplan: Any = None,
                    shared_exec: Any = None, group2ctx: Any = None, **shapes: Any):
        """Allocate arrays from shapes and bind (see :func:`mxkit.symbol.binding.simple_bind`);
        ``group2ctx`` places ``ctx_group`` attributes on devices (:mod:`mxkit.symbol.placement`)."""
        from mxkit.symbol.binding import simple_bind

        return simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict, memplan=memplan,
                           shared_exec=shared_exec, shapes=shapes, group2ctx=group2ctx)

    def bind(self, ctx: Any, args: Any, args_grad: Any = None, grad_req: Any = "write", aux_states: Any = None,
             group2ctx: Any = None, shared_exec: Any = None, memplan: Any = None):
        """Bind to given arrays (see :func:`mxkit.symbol.binding.bind`); ``group2ctx`` as in
        :meth:`simple_bind`."""
        from mxkit.symbol.binding import bind

        return bind(self, ctx, args, args_grad=args_grad, grad_req=grad_req, aux_states=aux_states,
                    memplan=memplan, shared_exec=shared_exec, group2ctx=group2ctx)

    def plan_memory(self, for_training: bool = True, memplan: str | None = None, type_dict: Any = None,
                    **shapes: Any):
        """The :class:`~mxkit.memplan.plan.MemoryPlan` a bind would use, allocating nothing."""
        from mxkit.symbol.binding import plan_memory

        return plan_memory(self, for_training=for_training, memplan=memplan, type_dict=type_dict, shapes=shapes)

    def optimize(self, type_dict: Any = None, **shapes: Any) -> Symbol:
        """This symbol with its elementwise chains fused into ``_FusedElemwise`` nodes, for
        inspection (``mx.sym.fuse``; see :func:`mxkit.symbol.fusion.fuse_symbol`).

        Parameters
        ----------
        type_dict : dict of str to dtype, optional
            Argument dtypes (default: config ``default_dtype``).
        **shapes : tuple
            Input shapes, as for :meth:`simple_bind`: whether nodes may merge depends on
            broadcasting and dtypes.

        Returns
        -------
        Symbol
            The forward graph after the ``prune`` and ``fuse`` passes; ``debug_str`` of a bind
            and ``mx.viz.plot_network`` show each fused node's expression.
        """
        from mxkit.symbol.fusion import fuse_symbol

        return fuse_symbol(self, type_dict, **shapes)

    def eval(self, ctx: Any = None, **kwargs: Any) -> list:
        """Bind to ``kwargs`` (name to NDArray), run forward, return the outputs."""
        executor = self.bind(ctx, kwargs, grad_req="null")
        return executor.forward()


# MXNet 1.x's fluent methods of Symbol: method name to operator
_FLUENT = {name: name for name in (
    "reshape_like", "zeros_like", "ones_like", "broadcast_axes", "repeat", "split", "slice", "slice_axis", "take",
    "one_hot", "pick", "sort", "topk", "argsort", "argmax", "argmax_channel", "argmin", "clip", "abs", "sign",
    "expand_dims", "tile", "transpose", "sum", "nansum", "prod", "nanprod", "mean", "max", "min", "norm", "round",
    "rint", "fix", "floor", "ceil", "trunc", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "degrees",
    "radians", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "exp", "expm1", "log", "log10", "log2",
    "log1p", "sqrt", "rsqrt", "cbrt", "rcbrt", "square", "reciprocal", "relu", "sigmoid", "softmax",
    "log_softmax", "broadcast_to", "broadcast_like", "swapaxes", "flip", "slice_like", "shape_array",
    "size_array", "depth_to_space", "space_to_depth", "diag", "softmin", "squeeze")}
_FLUENT.update({"reshape": "Reshape", "flatten": "Flatten", "swapaxes": "SwapAxis", "flip": "reverse", "pad": "Pad"})

# the operator of each symbol-symbol arithmetic (keyed by MXNet's internal name, the node name stem)
_SYMBOL_OPS = {"_plus": "elemwise_add", "_minus": "elemwise_sub", "_mul": "elemwise_mul", "_div": "elemwise_div",
               "_mod": "_mod", "_power": "_power", "_greater": "_greater", "_greater_equal": "_greater_equal",
               "_lesser": "_lesser", "_lesser_equal": "_lesser_equal", "_equal": "_equal",
               "_not_equal": "_not_equal"}


def _python_number(value: Any) -> int | float:
    """A plain int or float (so the attribute reads ``2``, as MXNet writes it, not ``2.0``)."""
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value)


#: Attribute names MXNet stores in dunder form (``lr_mult`` as ``__lr_mult__``) and lists
#: under both names; any other attribute is stored as given (MXNet's ``kHiddenKeys``).
ATTRIBUTE_HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")


def dunder_attrs(attrs: Mapping[str, str] | None, every_key: bool = False) -> dict[str, str]:
    """Attribute keys in MXNet's stored form: the hidden keys become dunder (``ctx_group``
    becomes ``__ctx_group__``), the others stay as given (``mood``, ``__mood__``).

    ``every_key``: make every key dunder. Operator nodes need it: a plain key there would be
    read back from JSON as an operator parameter (MXNet refuses such an attribute instead).
    """
    out: dict[str, str] = {}
    for key, value in (attrs or {}).items():
        dunder = key.startswith("__") and key.endswith("__")
        stored = f"__{key}__" if not dunder and (every_key or key in ATTRIBUTE_HIDDEN_KEYS) else key
        out[stored] = value if isinstance(value, str) else str(value)
    return out


def _listed(attrs: Mapping[str, str]) -> dict[str, str]:
    """``attrs`` plus the plain name of every stored hidden key, as MXNet lists them."""
    listed = dict(attrs)
    for key in ATTRIBUTE_HIDDEN_KEYS:
        stored = f"__{key}__"
        if stored in attrs:
            listed.setdefault(key, attrs[stored])
    return listed


def _map_entry(entry: Entry, mapping: dict[int, Node], replace: Mapping[str, Entry]) -> Entry:
    node = entry.node
    if node.is_variable and node.name in replace:
        return replace[node.name]
    return Entry(mapping[id(node)], entry.index)


def _single_entry(value: Any, what: str) -> Entry:
    if not isinstance(value, Symbol):
        raise SymbolError(f"{what} must be a Symbol, got {type(value).__name__} {value!r}")
    if len(value._outputs) != 1:
        raise SymbolError(f"{what} must have one output, got a symbol with {len(value._outputs)} outputs "
                          f"({', '.join(value.list_outputs())}); index it, e.g. sym[0]")
    return value._outputs[0]


#: MXNet's storage type codes, as a variable's ``__storage_type__`` attribute holds them
STORAGE_TYPE_CODES = {"default": 0, "row_sparse": 1, "csr": 2}


def Variable(name: str, attr: Mapping[str, str] | None = None, shape: Sequence[int] | None = None,
             lr_mult: float | None = None, wd_mult: float | None = None, dtype: Any = None, init: Any = None,
             stype: str | None = None, **kwargs: Any) -> Symbol:
    """A variable: a named input or parameter of a graph.

    Parameters
    ----------
    name : str
        The variable name (``data``, ``fc1_weight``).
    attr : dict of str to str, optional
        Extra attributes.
    shape : tuple of int, optional
        Stored as ``__shape__`` and used by shape inference.
    lr_mult, wd_mult : float, optional
        Learning-rate and weight-decay multipliers (``__lr_mult__``, ``__wd_mult__``).
    dtype : str or numpy dtype, optional
        Stored as ``__dtype__`` (MXNet's type flag).
    init : initializer or str, optional
        Stored as ``__init__`` (the initializer's ``dumps()`` when it has one).
    stype : str, optional
        Storage type of the arrays this variable takes: ``'default'`` (dense), ``'csr'`` or
        ``'row_sparse'`` (stored as ``__storage_type__``, MXNet's code 0, 2 or 1). The graph
        computes on dense values; a ``'row_sparse'`` parameter gets row_sparse gradients.
    **kwargs : str
        Further attributes, which must be named like ``__key__``.
    """
    if not isinstance(name, str) or not name:
        raise SymbolError(f"Variable needs a non-empty string name, got {name!r}")
    attrs = dunder_attrs(_attribute.current().get(dict(attr) if attr else None))
    if shape is not None:
        # MXNet takes shape=(1) -- which Python reads as 1 -- as the 1-d shape (1,)
        shape = (shape,) if isinstance(shape, int) else shape
        attrs["__shape__"] = str(tuple(int(d) for d in shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        from mxkit.core.dtypes import dtype_flag

        attrs["__dtype__"] = str(dtype_flag(dtype))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else (init.dumps() if hasattr(init, "dumps") else str(init))
    if stype is not None:
        if stype not in STORAGE_TYPE_CODES:
            raise SymbolError(f"Variable {name!r}: unknown storage type {stype!r}; MXNet's are 'default', "
                              f"'row_sparse' and 'csr'")
        attrs["__storage_type__"] = str(STORAGE_TYPE_CODES[stype])
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise SymbolError(f"Variable {name!r}: extra attribute {key!r} must be named like '__{key}__'")
        attrs[key] = str(value)
    return Symbol([Entry(Node(None, name, attrs), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of ``symbols``, in order."""
    symbols = list(symbols)
    if not symbols:
        raise SymbolError("Group needs at least one symbol, got an empty list")
    entries: list[Entry] = []
    for i, sym in enumerate(symbols):
        if not isinstance(sym, Symbol):
            raise SymbolError(f"Group: element {i} is {type(sym).__name__} {sym!r}, expected a Symbol")
        entries.extend(sym._outputs)
    return Symbol(entries)


def make_name(name: str | None, hint: str) -> str:
    """The name of a new node (the active name manager decides)."""
    return _name.current().get(name, hint)


copy = _copy.copy

__all__ = ["Group", "Symbol", "SymbolError", "Variable", "var"]
