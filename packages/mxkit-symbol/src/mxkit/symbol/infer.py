"""Shape and dtype inference over a graph, forward and backward until a fixed point.

Known values start at the variables (given shapes, ``__shape__``/``__dtype__``
attributes); each sweep runs the registry's forward inference for every operator whose
inputs are known, and the backward rules of :mod:`mxkit.symbol.input_shapes` for inputs
that follow from the others (parameter shapes from the data shape). Sweeps repeat until
nothing changes. A value reached two ways must agree; when it does not, the error names
the node, its operator and both shapes. Unknown dimensions are 0 (MXNet's partial shapes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mxkit.core.errors import DTypeError, MXKitError, ShapeError
from mxkit.core.shape_mode import is_np_shape
from mxkit.symbol.graph import Entry, Node, aux_variables, topo_order
from mxkit.symbol.input_shapes import PARTIAL_FORWARD, input_shapes

Key = tuple[int, int]
_MAX_SWEEPS = 100


def key(entry: Entry) -> Key:
    return (id(entry.node), entry.index)


def _describe(node: Node, position: int, output: bool) -> str:
    if output:
        return f"output {node.output_names()[position]!r}"
    source = node.inputs[position].node
    names = list(node.op.list_inputs(node.params)) + list(node.op.list_aux(node.params)) if node.op else []
    role = names[position] if position < len(names) else f"input {position}"
    return f"input {role!r} (from {source.output_names()[node.inputs[position].index]!r})"


def _merge_shape(old: tuple | None, new: tuple) -> tuple | None:
    """The shape known from both; ``None`` when they conflict (0 dims are unknown)."""
    if old is None:
        return tuple(new)
    if len(old) != len(new):
        return None
    merged = []
    for a, b in zip(old, new):
        if a != 0 and b != 0 and a != b:
            return None
        merged.append(a or b)
    return tuple(merged)


class _Values:
    """Entry values of one inference run, with the conflict check."""

    def __init__(self, kind: str, values: dict[Key, Any]) -> None:
        self.kind = kind
        self.values = values
        self.changed = False

    def get(self, k: Key) -> Any:
        return self.values.get(k)

    def assign(self, k: Key, value: Any, node: Node, position: int, output: bool) -> None:
        old = self.values.get(k)
        if self.kind == "shape":
            merged = _merge_shape(old, tuple(int(d) for d in value))
            ok = merged is not None
        else:
            merged, ok = value, old is None or old == value
        if not ok:
            error = ShapeError if self.kind == "shape" else DTypeError
            op_name = node.op.name if node.op else "null"
            raise error(f"{self.kind} inference: node {node.name!r} (operator {op_name}) {self.kind} conflict "
                        f"at its {_describe(node, position, output)}: it was inferred as {old}, and the operator "
                        f"implies {tuple(value) if self.kind == 'shape' else value}; make the given "
                        f"{self.kind}s agree")
        if merged != old:
            self.values[k] = merged
            self.changed = True


def _complete(shape: Any) -> bool:
    return shape is not None and all(d > 0 for d in shape)


def infer_shapes(order: Sequence[Node], known: Mapping[Key, tuple]) -> dict[Key, tuple]:
    """Shapes of every entry of ``order`` that ``known`` determines.

    Parameters
    ----------
    order : list of Node
        Nodes in topological order.
    known : dict
        ``(id(node), output index)`` to shape for the entries known beforehand.

    Raises
    ------
    ShapeError
        When an operator rejects its input shapes or two sources disagree.
    """
    values = _Values("shape", dict(known))
    finished: set[int] = set()
    for _sweep in range(_MAX_SWEEPS):
        values.changed = False
        for node in order:
            if node.op is None or id(node) in finished:
                continue
            _infer_node_shape(node, values, finished)
        if not values.changed:
            break
    return values.values


def _infer_node_shape(node: Node, values: _Values, finished: set[int]) -> None:
    op = node.op
    ins = [values.get(key(e)) for e in node.inputs]
    outs = [values.get((id(node), i)) for i in range(node.num_outputs())]
    try:
        known_inputs = input_shapes(op, node.params, ins, outs)
    except ShapeError as exc:
        raise ShapeError(f"shape inference: node {node.name!r} ({op.name}): {exc}") from None
    for position, shape in known_inputs.items():
        if position < len(node.inputs):
            values.assign(key(node.inputs[position]), shape, node, position, output=False)
    ins = [values.get(key(e)) for e in node.inputs]
    if any(s is None for s in ins):
        return
    complete = all(_complete(s) for s in ins)
    partial_rule = None if complete else PARTIAL_FORWARD.get(op.name)
    try:
        if partial_rule is not None:
            out_shapes = partial_rule(node.params, [tuple(s) for s in ins])
        else:
            out_shapes = op.infer_shape(node.params, [tuple(s) for s in ins])
    except MXKitError as exc:
        if not complete:
            return  # partial shapes: the operator may need the unknown dims; try after more sweeps
        raise ShapeError(f"shape inference: node {node.name!r} failed in {op.describe_call(node.params, ins)}: "
                         f"{exc}") from None
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        if not complete:
            return
        raise ShapeError(f"shape inference: node {node.name!r} failed in {op.describe_call(node.params, ins)}: "
                         f"{type(exc).__name__}: {exc}") from None
    for i, shape in enumerate(out_shapes):
        values.assign((id(node), i), shape, node, i, output=True)
    if complete:
        finished.add(id(node))


#: operators whose output dtype is their ``dtype`` parameter, known before their input's
_CASTS = frozenset({"Cast", "amp_cast"})


def infer_dtypes(order: Sequence[Node], known: Mapping[Key, str]) -> dict[Key, str]:
    """dtype names of every entry that ``known`` determines (as :func:`infer_shapes`).

    An operator's unknown inputs take the dtype of its first known input (MXNet's
    ``ElemwiseType``, which nearly every operator with parameters uses).
    """
    values = _Values("dtype", dict(known))
    for _sweep in range(_MAX_SWEEPS):
        values.changed = False
        for node in order:
            if node.op is None:
                continue
            ins = [values.get(key(e)) for e in node.inputs]
            known_ins = [d for d in ins if d is not None]
            outs = [values.get((id(node), i)) for i in range(node.num_outputs())]
            fill = known_ins[0] if known_ins else (outs[0] if outs and outs[0] is not None else None)
            if node.op.name in _CASTS:
                fill = None  # a cast's input dtype says nothing of its other inputs or its output
            if fill is not None:
                for position, dtype in enumerate(ins):
                    if dtype is None and node.inputs[position].node.is_variable:
                        values.assign(key(node.inputs[position]), fill, node, position, output=False)
                ins = [values.get(key(e)) for e in node.inputs]
            if any(d is None for d in ins):
                if node.op.name in _CASTS and node.params.get("dtype") is not None:
                    # a cast's output dtype is its parameter whatever the input (MXNet infers it too)
                    values.assign((id(node), 0), _canonical(node.params["dtype"]), node, 0, output=True)
                continue
            try:
                out_dtypes = node.op.infer_dtype(node.params, list(ins))
            except MXKitError as exc:
                raise DTypeError(f"dtype inference: node {node.name!r} (operator {node.op.name}) rejected input "
                                 f"dtypes {ins}: {exc}") from None
            for i, dtype in enumerate(out_dtypes):
                values.assign((id(node), i), _canonical(dtype), node, i, output=True)
        if not values.changed:
            break
    return values.values


def _canonical(dtype: Any) -> str:
    from mxkit.core.dtypes import dtype_name

    return dtype_name(dtype)


# -- the Symbol methods ---------------------------------------------------------------------

def _given(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> dict[str, Any]:
    arguments = symbol.list_arguments()
    inputs = symbol.list_inputs()
    if len(args) > len(arguments):
        raise MXKitError(f"{what}: got {len(args)} positional values for {len(arguments)} arguments "
                         f"({', '.join(arguments)})")
    given = {name: value for name, value in zip(arguments, args) if value is not None}
    for name, value in kwargs.items():
        if name not in inputs:
            raise MXKitError(f"{what}: {name!r} is not an input of the symbol; its inputs are: "
                             f"{', '.join(inputs)}")
        if value is not None:
            given[name] = value
    return given


def _variables(order: Iterable[Node]) -> dict[str, Node]:
    return {n.name: n for n in order if n.is_variable}


def _unknown_as_zero(shape: Any) -> tuple:
    # -1 is an unknown dimension in MXNet's NumPy-shape mode, 0 in its legacy mode (and here)
    return tuple(max(int(d), 0) for d in shape)


def variable_shapes(order: Sequence[Node], given: Mapping[str, Any]) -> dict[Key, tuple]:
    """Initial shapes: ``__shape__`` attributes, overridden by ``given`` (name to shape)."""
    import ast

    known: dict[Key, tuple] = {}
    for node in order:
        if not node.is_variable:
            continue
        if node.name in given:
            shape = given[node.name]
            if isinstance(shape, int):
                shape = (shape,)
            try:
                known[(id(node), 0)] = _unknown_as_zero(shape)
            except (TypeError, ValueError):
                raise ShapeError(f"shape of {node.name!r} must be a tuple of ints, got {shape!r}") from None
        elif "__shape__" in node.attrs:
            shape = _unknown_as_zero(ast.literal_eval(node.attrs["__shape__"]))
            if (shape and any(d > 0 for d in shape)) or shape == ():
                known[(id(node), 0)] = shape
    return known


def variable_dtypes(order: Sequence[Node], given: Mapping[str, Any]) -> dict[Key, str]:
    """Initial dtypes: ``__dtype__`` attributes (MXNet type flags), overridden by ``given``."""
    from mxkit.core.dtypes import dtype_from_flag

    known: dict[Key, str] = {}
    for node in order:
        if not node.is_variable:
            continue
        if node.name in given:
            known[(id(node), 0)] = _canonical(given[node.name])
        elif "__dtype__" in node.attrs:
            known[(id(node), 0)] = dtype_from_flag(int(node.attrs["__dtype__"]))
    return known


def _split(symbol: Any, order: Sequence[Node], values: Mapping[Key, Any]):
    aux = aux_variables(order)
    args = [values.get((id(n), 0)) for n in order if n.is_variable and id(n) not in aux]
    auxs = [values.get((id(n), 0)) for n in order if n.is_variable and id(n) in aux]
    outs = [values.get(key(e)) for e in symbol._outputs]
    return args, outs, auxs


def infer_shape(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any], partial: bool):
    """Implementation of ``Symbol.infer_shape`` and ``infer_shape_partial``."""
    order = topo_order(symbol._outputs)
    given = _given(symbol, args, kwargs, "infer_shape")
    values = infer_shapes(order, variable_shapes(order, given))
    arg_shapes, out_shapes, aux_shapes = _split(symbol, order, values)
    if partial:
        if is_np_shape():
            # MXNet's NumPy-shape mode writes an unknown shape as None and an unknown dimension as -1
            return tuple([None if s is None else tuple(d if d > 0 else -1 for d in s) for s in group]
                         for group in (arg_shapes, out_shapes, aux_shapes))
        return tuple([() if s is None else s for s in group] for group in (arg_shapes, out_shapes, aux_shapes))
    if any(not _complete(s) for group in (arg_shapes, out_shapes, aux_shapes) for s in group):
        return None, None, None
    return arg_shapes, out_shapes, aux_shapes


def infer_type(symbol: Any, args: Sequence[Any], kwargs: Mapping[str, Any], partial: bool = False):
    """Implementation of ``Symbol.infer_type``: numpy dtypes, or ``(None, None, None)``.

    With ``partial`` (``infer_type_partial``) the dtypes not inferred are ``None`` in the lists.
    """
    from mxkit.core.dtypes import to_numpy

    order = topo_order(symbol._outputs)
    given = _given(symbol, args, kwargs, "infer_type")
    values = infer_dtypes(order, variable_dtypes(order, given))
    groups = _split(symbol, order, values)
    if partial:
        return tuple([None if d is None else to_numpy(d).type for d in group] for group in groups)
    if any(d is None for group in groups for d in group):
        return None, None, None
    return tuple([to_numpy(d).type for d in group] for group in groups)


def missing_report(symbol: Any, values: Mapping[Key, Any], what: str) -> str:
    """``'fc1_weight, label'``: the arguments whose value inference did not reach."""
    order = topo_order(symbol._outputs)
    return ", ".join(n.name for n in order if n.is_variable and not _complete_value(values.get((id(n), 0)), what))


def _complete_value(value: Any, what: str) -> bool:
    return _complete(value) if what == "shape" else value is not None


__all__ = ["infer_dtypes", "infer_shape", "infer_shapes", "infer_type", "key", "missing_report",
           "variable_dtypes", "variable_shapes"]
