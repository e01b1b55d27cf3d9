"""The graph pass ``fuse``: elementwise chains become one ``_FusedElemwise`` node.

MXNet's paper fuses ``a*b+1`` into one kernel instead of two; this pass does it for every
maximal group of elementwise and broadcast operators (arithmetic with arrays and
scalars, unary math, activations, clip, where, comparisons, and the elementwise backward
operators of all of these) whose intermediate results nothing outside the group reads:

- an intermediate must have all its readers inside the group, and must be neither an
  output nor a gradient the bind writes (the roots); a forward result the backward
  graph reads has a reader outside its forward group, so it stays;
- forward and backward nodes never share a group (the forward pass must not do backward
  work, nor the reverse);
- every member computes in one floating dtype, and the group's inputs broadcast to the
  shape of its result.

Each group becomes one node holding the group's expression as a program (see
:mod:`mxkit.ndarray.kernels`): its intermediates leave the memory plan, and
its kernel makes one pass over memory (numexpr) or writes every step into the output
buffer (numpy). The node keeps the name of the group's last node, so outputs keep their
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mxkit.ndarray.kernels import FLOAT_DTYPES, Program
from mxkit.ndarray.ops.binary import ELEMWISE_NAMES, REVERSE_SCALAR_NAMES, SCALAR_NAMES
from mxkit.ndarray.registry import get_registry
from mxkit.ndarray.shapes import broadcast_shape
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.passes import PassGraph, register_pass

FUSED_OPERATOR = "_FusedElemwise"


class ProgramBuilder:
    """Appends steps to a program; operands are ``"x<i>"``, ``"v<k>"`` or floats."""

    def __init__(self) -> None:
        self.steps: list[list[Any]] = []

    def __call__(self, primitive: str, *operands: Any) -> Any:
        if primitive == "copy" and isinstance(operands[0], str):
            return operands[0]  # inside the program a copy is the value itself (see finish)
        self.steps.append([primitive, *(float(o) if isinstance(o, int | float) else o for o in operands)])
        return f"v{len(self.steps) - 1}"

    def finish(self, result: Any) -> None:
        """Make ``result`` the program's output (the last step), copying it if it is not."""
        if result != f"v{len(self.steps) - 1}":
            self.steps.append(["copy", result])


# A translator emits a node's computation: ``translate(emit, params, args) -> operand`` or None
# when these parameters are not fusible; ``args[i]`` is the operand of input i.
Translator = Callable[[ProgramBuilder, dict, list], Any]
TRANSLATORS: dict[str, Translator] = {}


def _binary(primitive: str) -> Translator:
    return lambda emit, p, a: emit(primitive, a[0], a[1])


_BINARY_PRIMITIVES = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "power": "power",
                      "maximum": "maximum", "minimum": "minimum", "hypot": "hypot", "equal": "equal",
                      "not_equal": "not_equal", "greater": "greater", "greater_equal": "greater_equal",
                      "lesser": "lesser", "lesser_equal": "lesser_equal", "logical_and": "logical_and",
                      "logical_or": "logical_or", "logical_xor": "logical_xor"}
for _key, _primitive in _BINARY_PRIMITIVES.items():
    TRANSLATORS[ELEMWISE_NAMES.get(_key, (f"_{_key}",))[0]] = _binary(_primitive)
    TRANSLATORS[f"broadcast_{_key}"] = _binary(_primitive)
    TRANSLATORS[SCALAR_NAMES.get(_key, f"_{_key}_scalar")] = (
        lambda prim: lambda emit, p, a: emit(prim, a[0], p["scalar"]))(_primitive)
    if _key in REVERSE_SCALAR_NAMES:
        TRANSLATORS[REVERSE_SCALAR_NAMES[_key]] = (
            lambda prim: lambda emit, p, a: emit(prim, p["scalar"], a[0]))(_primitive)


def _unary(build: Callable[[ProgramBuilder, Any], Any]) -> Translator:
    return lambda emit, p, a: build(emit, a[0])


# forward unary functions, written as the generic kernels compute them (so results agree)
UNARY_BUILDERS: dict[str, Callable[[ProgramBuilder, Any], Any]] = {
    "relu": lambda e, x: e("maximum", x, 0),
    "sigmoid": lambda e, x: e("div", 1, e("add", 1, e("exp", e("negative", x)))),
    "softrelu": lambda e, x: e("logaddexp", 0, x),
    "softsign": lambda e, x: e("div", x, e("add", 1, e("abs", x))),
    "rsqrt": lambda e, x: e("div", 1, e("sqrt", x)),
    "rcbrt": lambda e, x: e("div", 1, e("cbrt", x)),
    "square": lambda e, x: e("mul", x, x),
    "reciprocal": lambda e, x: e("div", 1, x),
    "degrees": lambda e, x: e("mul", x, 180 / math.pi),
    "radians": lambda e, x: e("mul", x, math.pi / 180),
    "identity": lambda e, x: e("copy", x),
    "fix": lambda e, x: e("trunc", x),
    "logical_not": lambda e, x: e("equal", x, 0),
}
for _name in ("tanh", "exp", "expm1", "log", "log10", "log2", "log1p", "sqrt", "cbrt", "negative", "abs", "sin",
              "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "sign",
              "floor", "ceil", "rint", "trunc"):
    UNARY_BUILDERS[_name] = (lambda prim: lambda e, x: e(prim, x))(_name)
for _name, _build in UNARY_BUILDERS.items():
    TRANSLATORS[_name] = _unary(_build)

# backward unary operators ``_backward_<f>(out_grad, x_or_y)``: out_grad * derivative
DERIVATIVE_BUILDERS: dict[str, Callable[[ProgramBuilder, Any], Any]] = {
    "relu": lambda e, y: e("greater", y, 0),
    "sigmoid": lambda e, y: e("mul", y, e("sub", 1, y)),
    "tanh": lambda e, y: e("sub", 1, e("mul", y, y)),
    "softrelu": lambda e, y: e("negative", e("expm1", e("negative", y))),
    "softsign": lambda e, x: (lambda t: e("mul", t, t))(e("div", 1, e("add", 1, e("abs", x)))),
    "exp": lambda e, y: y,
    "expm1": lambda e, y: e("add", y, 1),
    "log": lambda e, x: e("div", 1, x),
    "log1p": lambda e, x: e("div", 1, e("add", 1, x)),
    "sqrt": lambda e, y: e("div", 0.5, y),
    "square": lambda e, x: e("mul", 2, x),
    "reciprocal": lambda e, x: e("div", -1, e("mul", x, x)),
    "abs": lambda e, x: e("sign", x),
    "sin": lambda e, x: e("cos", x),
    "cos": lambda e, x: e("negative", e("sin", x)),
    "tan": lambda e, y: e("add", 1, e("mul", y, y)),
    "arctan": lambda e, x: e("div", 1, e("add", 1, e("mul", x, x))),
}
for _name, _derivative in DERIVATIVE_BUILDERS.items():
    TRANSLATORS[f"_backward_{_name}"] = (
        lambda d: lambda emit, p, a: emit("mul", a[0], d(emit, a[1])))(_derivative)
TRANSLATORS["_backward_negative"] = lambda emit, p, a: emit("negative", a[0])
TRANSLATORS["_backward_identity"] = lambda emit, p, a: emit("copy", a[0])
# the forward of BlockGrad (stop_gradient) and _copy is a copy: fused into the chain before
# it, a stopped chain's result is written once, into the output (MXNet shares it in place)
TRANSLATORS["BlockGrad"] = TRANSLATORS["identity"]
TRANSLATORS["_copy"] = TRANSLATORS["identity"]


def _activation(emit: ProgramBuilder, params: dict, args: list) -> Any:
    build = UNARY_BUILDERS.get(params["act_type"])
    return None if build is None else build(emit, args[0])


def _leaky(emit: ProgramBuilder, params: dict, args: list) -> Any:
    x, act, slope = args[0], params["act_type"], params["slope"]
    if act == "leaky":
        return emit("where", emit("greater", x, 0), x, emit("mul", slope, x))
    if act == "elu":
        return emit("where", emit("greater", x, 0), x, emit("mul", slope, emit("expm1", emit("minimum", x, 0))))
    return None


def _leaky_backward(emit: ProgramBuilder, params: dict, args: list) -> Any:
    if params["act_type"] != "leaky":
        return None
    out_grad, x = args[0], args[1]
    return emit("where", emit("greater", x, 0), out_grad, emit("mul", params["slope"], out_grad))


def _clip_backward(emit: ProgramBuilder, params: dict, args: list) -> Any:
    inside = emit("logical_and", emit("greater_equal", args[1], params["a_min"]),
                  emit("lesser_equal", args[1], params["a_max"]))
    return emit("mul", args[0], inside)


TRANSLATORS.update({
    "Activation": _activation,
    "LeakyReLU": _leaky,
    "_backward_LeakyReLU": _leaky_backward,
    "clip": lambda emit, p, a: emit("clip", a[0], p["a_min"], p["a_max"]),
    "_backward_clip": _clip_backward,
    "where": lambda emit, p, a: emit("where", a[0], a[1], a[2]),
    # with equal shapes these are copies (the gradient of a same-shape broadcast op)
    "_reduce_sum_like": lambda emit, p, a: emit("copy", a[0]),
    "broadcast_like": lambda emit, p, a: emit("copy", a[0]),
})
# operators that reduce or broadcast to the shape of their second input (read for its shape only,
# ``OpDef.reads_shape_only``: it does not become an input of the fused node)
_SHAPED_LIKE = ("_reduce_sum_like", "broadcast_like")


class _Args:
    """Operands of a node's inputs, resolved when a translator reads them."""

    def __init__(self, resolve: Callable[[int], Any]) -> None:
        self._resolve = resolve

    def __getitem__(self, index: int) -> Any:
        return self._resolve(index)


def _fusible(graph: PassGraph, node: Node) -> bool:
    """Whether ``node`` can join a fused group (a translator accepts it with these dtypes and shapes)."""
    if node.op is None or node.num_outputs() != 1 or node.op.name not in TRANSLATORS or node.num_aux():
        return False
    out_key = (id(node), 0)
    dtype = graph.dtypes.get(out_key)
    if dtype not in FLOAT_DTYPES:
        return False
    out_shape = tuple(graph.shapes[out_key])
    unread = node.op.reads_shape_only
    for position, entry in enumerate(node.inputs):
        if position in unread:
            continue
        if graph.dtypes.get(key(entry)) != dtype:
            return False
        shape = tuple(graph.shapes[key(entry)])
        if node.op.name in _SHAPED_LIKE and shape != out_shape:
            return False  # a real reduction or broadcast: not elementwise
        if node.op.name == "where" and shape != out_shape:
            return False  # a 1-D condition selects rows, which is not numpy broadcasting
        try:
            if broadcast_shape(shape, out_shape, node.op.name) != out_shape:
                return False
        except Exception:
            return False
    return TRANSLATORS[node.op.name](ProgramBuilder(), node.params, _Args(lambda i: "x0")) is not None


def find_groups(graph: PassGraph) -> list[list[Node]]:
    """Maximal fusible groups of two or more nodes, each in execution order (its root last)."""
    readers: dict[Any, set[int]] = {}
    for node in graph.nodes:
        for entry in node.inputs:
            readers.setdefault(key(entry), set()).add(id(node))
    root_keys = {key(r) for r in graph.roots}
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    last_read = {k: max(position[r] for r in ids) for k, ids in readers.items()}
    fusible = {id(n) for n in graph.nodes if _fusible(graph, n)}
    assigned: set[int] = set()
    groups = []

    def extends_lifetimes(producer: Node, root: Node, members: dict[int, Node]) -> bool:
        # The fused node runs where the root ran, so the producer's other inputs are read
        # there. When other nodes run in between (and allocate), an intermediate the producer
        # was the last to read would now stay live across them: fusing a gradient sum whose
        # terms are made one after another would hold every term at once.
        start, end = position[id(producer)], position[id(root)]
        inside = sum(1 for m in members.values() if start < position[id(m)] < end)
        if end - start - 1 <= inside:
            return False
        return any(id(e.node) in position and id(e.node) not in members and last_read[key(e)] < end
                   for e in producer.inputs)

    for root in reversed(graph.nodes):
        if id(root) in assigned or id(root) not in fusible:
            continue
        members = {id(root): root}
        assigned.add(id(root))
        stack = [root]
        while stack:
            member = stack.pop()
            for entry in member.inputs:
                producer = entry.node
                if (id(producer) not in fusible or id(producer) in assigned or key(entry) in root_keys
                        or graph.is_forward(producer) != graph.is_forward(root)
                        or not readers[key(entry)] <= members.keys()
                        or extends_lifetimes(producer, root, members)):
                    continue
                members[id(producer)] = producer
                assigned.add(id(producer))
                stack.append(producer)
        if len(members) > 1:
            groups.append(sorted(members.values(), key=lambda n: position[id(n)]))
    return groups


def build_program(graph: PassGraph, group: list[Node]) -> tuple[Program, list[Entry]]:
    """The program of ``group`` and the entries it reads (the fused node's inputs)."""
    emit = ProgramBuilder()
    value_of: dict[int, Any] = {}
    inputs: list[Entry] = []
    input_index: dict[Any, int] = {}

    def operand(entry: Entry) -> Any:
        if id(entry.node) in value_of:
            return value_of[id(entry.node)]
        k = key(entry)
        if k not in input_index:
            input_index[k] = len(inputs)
            inputs.append(entry)
        return f"x{input_index[k]}"

    for node in group:
        value_of[id(node)] = TRANSLATORS[node.op.name](emit, node.params,
                                                       _Args(lambda i, n=node: operand(n.inputs[i])))
    root = group[-1]
    emit.finish(value_of[id(root)])
    return Program(graph.dtypes[(id(root), 0)], len(inputs), tuple(tuple(s) for s in emit.steps)), inputs


def fuse(graph: PassGraph) -> None:
    """The ``fuse`` pass: replace each fusible group of ``graph`` by one ``_FusedElemwise`` node."""
    operator = get_registry().get(FUSED_OPERATOR)
    replacements: dict[Any, Entry] = {}
    removed: set[int] = set()
    fused_at: dict[int, list[Node]] = {}
    for group in find_groups(graph):
        root = group[-1]
        program, inputs = build_program(graph, group)
        out_shape = tuple(graph.shapes[(id(root), 0)])
        shape = tuple(graph.shapes[key(inputs[0])])
        for entry in inputs[1:]:
            shape = broadcast_shape(shape, tuple(graph.shapes[key(entry)]), FUSED_OPERATOR)
        if shape != out_shape:
            continue  # a broadcast_to/like inside made the result larger than every input
        params = {"expression": program.to_json(), "nodes": ",".join(n.name for n in group)}
        dunders = {k: v for k, v in root.attrs.items() if k.startswith("__") and k.endswith("__")}
        node = Node(operator, root.name, {**dunders, **operator.params.to_strings(params)}, inputs, params)
        graph.shapes[(id(node), 0)] = out_shape
        graph.dtypes[(id(node), 0)] = program.dtype
        if graph.is_forward(root):
            graph.forward_ids.add(id(node))
        if any(id(n) in graph.recomputed_ids for n in group):
            graph.recomputed_ids.add(id(node))
        replacements[(id(root), 0)] = Entry(node, 0)
        removed.update(id(n) for n in group)
        fused_at[id(root)] = [node]
    if fused_at:
        graph.splice(fused_at, removed, replacements)


register_pass("fuse", fuse, rewrites=True, portable=False)


def fused_expression(node: Node) -> str:
    """``((a * b) + 1.0f)``: a fused node's expression in C over its inputs' names."""
    from mxkit.ndarray.kernels import render_c_expression

    names = [e.node.output_names()[e.index] for e in node.inputs]
    return render_c_expression(node.params["expression"], names)


def describe_fused(node: Node) -> str:
    """``((a * b) + 1.0f)  [_mul0, _plusscalar0]``: the expression and the nodes it replaced."""
    return f"{fused_expression(node)}  [{node.params['nodes'].replace(',', ', ')}]"


def fuse_symbol(symbol: Any, type_dict: dict | None = None, **shapes: Any) -> Any:
    """The symbol with its elementwise groups fused, for inspection (``mx.sym.fuse``).

    Fusion needs shapes and dtypes (broadcasting and dtype rules decide what may merge),
    so give the input shapes as for ``simple_bind``. Only the forward graph is fused: a
    bind of the result differentiates nothing through fused nodes.
    """
    from mxkit.core import config
    from mxkit.symbol.exec_graph import build_exec_graph
    from mxkit.symbol.symbol import Symbol

    with config.override(graph_passes=["prune", "fuse"], backward_do_mirror=False, fold_batchnorm=False):
        graph = build_exec_graph(symbol, shapes, type_dict or {}, "null", for_training=False)
    return Symbol(graph.heads)

__all__ = ["DERIVATIVE_BUILDERS", "FUSED_OPERATOR", "ProgramBuilder", "TRANSLATORS", "UNARY_BUILDERS",
           "build_program", "describe_fused", "find_groups", "fuse", "fuse_symbol", "fused_expression"]
