"""``Block`` and ``HybridBlock``: Gluon's building blocks, with MXNet 1.9.1's naming.

A block's prefix comes from its class name and a counter: at the top level the counter
is the symbol name manager's (``dense0_``, ``dense1_``...), inside a parent's
``name_scope()`` the parent's own counter appended to the parent's prefix
(``hybridsequential0_dense0_``). Parameter names are the prefix plus the local name
(``dense0_weight``); the structural names that ``save_parameters`` writes are attribute
paths (``0.weight``, ``features.1.bias``).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections import OrderedDict, defaultdict
from typing import Any

from mxkit.gluon.parameter import BlockInputError, DeferredInitializationError, GluonError, Parameter, ParameterDict


class HybridizedSummaryError(GluonError, AssertionError):
    """``summary()`` was called on a hybridized network, whose children do not run one by one.
    Also an ``AssertionError``, the class MXNet 1.9.1 raises there."""


class BlockAttributeError(GluonError, TypeError):
    """A Block or Parameter attribute was overwritten by a value of another type."""


class HookHandle:
    """Returned by ``register_forward_hook``: :meth:`detach` removes the hook."""

    def __init__(self, hooks: list[Any], hook: Any) -> None:
        self._hooks = hooks
        self._hook = hook

    def detach(self) -> None:
        """Remove the hook (again is a no-op)."""
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


class _BlockScope:
    """The name scope of a block: where children get their prefixes."""

    _current = threading.local()

    def __init__(self, block: Block) -> None:
        self._block = block
        self._counter: dict[str, int] = {}
        self._old_scope: _BlockScope | None = None
        self._name_scope: Any = None

    @staticmethod
    def create(prefix: str | None, params: ParameterDict | None, hint: str) -> tuple[str, ParameterDict]:
        from mxkit.symbol import name as sym_name

        current = getattr(_BlockScope._current, "value", None)
        if current is None:
            if prefix is None:
                prefix = sym_name.current().get(None, hint) + "_"
            params = ParameterDict(prefix) if params is None else ParameterDict(params.prefix, params)
            return prefix, params
        if prefix is None:
            count = current._counter.get(hint, 0)
            prefix = f"{hint}{count}_"
            current._counter[hint] = count + 1
        if params is None:
            parent = current._block.params
            params = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            params = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, params

    def __enter__(self) -> _BlockScope:
        from mxkit.symbol.name import Prefix

        if self._block._empty_prefix:
            return self
        self._old_scope = getattr(_BlockScope._current, "value", None)
        _BlockScope._current.value = self
        self._name_scope = Prefix(self._block.prefix)
        self._name_scope.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._block._empty_prefix:
            return
        self._name_scope.__exit__(*exc)
        self._name_scope = None
        _BlockScope._current.value = self._old_scope


def _flatten_arrays(values: Any, what: str) -> list[Any]:
    if isinstance(values, list | tuple):
        flat: list[Any] = []
        for value in values:
            flat.extend(_flatten_arrays(value, what))
        return flat
    return [values]


def flatten_nested(values: Any) -> tuple[list[Any], Any]:
    """Arrays nested in lists and tuples as a flat list, and the format to rebuild them.

    The format is MXNet's: ``0`` for one array, ``n > 1`` for a Symbol of ``n`` outputs, a
    list of formats for a list. It lets a hybridized block take and return nested arguments
    (an RNN's list of states) while its graph has flat inputs and outputs.
    """
    from mxkit.symbol import Symbol

    if isinstance(values, list | tuple):
        flat: list[Any] = []
        fmts: list[Any] = []
        for value in values:
            items, fmt = flatten_nested(value)
            flat.extend(items)
            fmts.append(fmt)
        return flat, fmts
    if isinstance(values, Symbol):
        count = len(values.list_outputs())
        return [values], count if count > 1 else 0
    if values is None:
        return [None], -1  # an absent optional argument: no graph input, None again when regrouped
    return [values], 0


def _with_nones(values: list[Any], fmt: Any) -> list[Any]:
    """``values`` (one per array of ``fmt``) with a None put where ``fmt`` has an absent argument."""
    flags: list[bool] = []

    def walk(item: Any) -> None:
        if isinstance(item, list):
            for sub in item:
                walk(sub)
        elif item == -1:
            flags.append(True)
        else:
            flags.extend([False] * max(item, 1))

    walk(fmt)
    rest = iter(values)
    return [None if absent else next(rest) for absent in flags]


def regroup_nested(flat: list[Any], fmt: Any) -> tuple[Any, list[Any]]:
    """The inverse of :func:`flatten_nested`: the nested value and the unused rest of ``flat``."""
    if isinstance(fmt, int):
        if fmt in (0, -1):
            return flat[0], flat[1:]
        return flat[:fmt], flat[fmt:]
    nested = []
    for item in fmt:
        value, flat = regroup_nested(flat, item)
        nested.append(value)
    return nested, flat


class Block:
    """The base class of all layers and models (MXNet's ``gluon.Block``).

    Subclasses create their children and parameters in ``__init__`` inside
    ``with self.name_scope():`` and compute in :meth:`forward`.

    Parameters
    ----------
    prefix : str, optional
        The prefix of this block's parameter and child names (default: class name + counter).
    params : ParameterDict, optional
        Parameters to share with another block.
    """

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._children: OrderedDict[str, Block] = OrderedDict()
        self._reg_params: dict[str, Parameter] = {}
        self._forward_hooks: list[Any] = []
        self._forward_pre_hooks: list[Any] = []

    def __repr__(self) -> str:
        body = "\n".join(f"  ({key}): {block!r}".replace("\n", "\n  ") for key, block in self._children.items())
        return f"{type(self).__name__}(\n{body}\n)" if body else f"{type(self).__name__}()"

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_children") and hasattr(self, name):
            existing = getattr(self, name)
            if isinstance(existing, Parameter | Block) and not isinstance(value, type(existing)):
                raise BlockAttributeError(f"changing attribute {name!r} of {type(self).__name__} from "
                                 f"{type(existing).__name__} to {type(value).__name__} is not allowed")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            if name in self._reg_params and self._reg_params[name] is not value:
                raise GluonError(f"overriding Parameter attribute {name!r} is not allowed")
            self._reg_params[name] = value
        super().__setattr__(name, value)

    def _alias(self) -> str:
        return type(self).__name__.lower()

    @property
    def prefix(self) -> str:
        """The prefix of this block's names (``dense0_``)."""
        return self._prefix

    @property
    def name(self) -> str:
        """The prefix without its trailing underscore (``dense0``)."""
        return self._name

    @property
    def params(self) -> ParameterDict:
        """This block's own parameters (not its children's)."""
        return self._params

    def name_scope(self) -> _BlockScope:
        """The scope in which children and parameters get this block's prefix."""
        return self._scope

    def register_child(self, block: Block, name: str | None = None) -> None:
        """Make ``block`` a child (its parameters are collected with this block's)."""
        if name is None:
            name = str(len(self._children))
        self._children[name] = block

    def register_forward_pre_hook(self, hook: Any) -> HookHandle:
        """Call ``hook(block, inputs)`` before each forward; returns a handle to detach it."""
        self._forward_pre_hooks.append(hook)
        return HookHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Any) -> HookHandle:
        """Call ``hook(block, inputs, outputs)`` after each forward; returns a handle to detach it."""
        self._forward_hooks.append(hook)
        return HookHandle(self._forward_hooks, hook)

    def _self_and_descendants(self) -> list[Block]:
        blocks = [self]
        for child in self._children.values():
            blocks.extend(child._self_and_descendants())
        return blocks

    def apply(self, fn: Any) -> Block:
        """Call ``fn(block)`` on every descendant, children first, then on this block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """This block's and its descendants' parameters, optionally those whose name matches
        the regular expression ``select`` (``'.*weight|.*bias'``)."""
        self._warn_unregistered_containers()
        result = ParameterDict(self._params.prefix)
        if select is None:
            result.update(self.params)
        else:
            pattern = re.compile(select)
            for name, value in self.params.items():
                if pattern.match(name):
                    result._params[name] = value
        for child in self._children.values():
            result.update(child.collect_params(select=select))
        return result

    def _warn_unregistered_containers(self) -> None:
        """Warn about lists, tuples and dicts of Blocks held as attributes: their parameters are
        not this block's (only attributes that are Blocks register), a common porting mistake."""
        def holds_block(value: Any) -> bool:
            if isinstance(value, Block):
                return True
            if isinstance(value, dict):
                value = list(value.values())
            return isinstance(value, list | tuple) and any(holds_block(v) for v in value)

        for name, value in vars(self).items():
            if isinstance(value, list | tuple | dict) and not name.startswith("_") and holds_block(value):
                warnings.warn(f"{type(self).__name__}.{name} is a {type(value).__name__} holding Blocks, which are "
                              f"not registered as children: their parameters are left out of collect_params(), "
                              f"initialize() and save_parameters(); register them with register_child() or hold "
                              f"them in an nn.Sequential / nn.HybridSequential", stacklevel=3)

    def _collect_params_with_prefix(self, prefix: str = "") -> dict[str, Parameter]:
        if prefix:
            prefix += "."
        result = {prefix + key: value for key, value in self._reg_params.items()}
        for name, child in self._children.items():
            result.update(child._collect_params_with_prefix(prefix + name))
        return result

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False, force_reinit: bool = False) -> None:
        """Initialise every parameter (``init`` is the default initializer: ``mx.init.Uniform()``)."""
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def register_op_hook(self, callback: Any, monitor_all: bool = False) -> None:
        """Install ``callback(name, op_name, NDArray)`` on the hybridized descendants (MXNet's
        op hook): each operator of their graphs reports its outputs as ``<node>_output``,
        and with ``monitor_all`` its inputs first (``<node>_<argument>``)."""
        for child in self._children.values():
            child.register_op_hook(callback, monitor_all)

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the hybrid children (a plain Block itself stays imperative)."""
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def cast(self, dtype: Any) -> None:
        """Cast every parameter to ``dtype``."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self.params.values():
            param.cast(dtype)

    def zero_grad(self) -> None:
        """Zero every parameter's gradient."""
        self.collect_params().zero_grad()

    def reset_ctx(self, ctx: Any) -> None:
        """Move every parameter to ``ctx``."""
        self.collect_params().reset_ctx(ctx)

    # -- saving and loading ------------------------------------------------------------------

    def save_parameters(self, filename: str, deduplicate: bool = False) -> None:
        """Save the parameters under their structural names (``0.weight``), MXNet's format."""
        from mxkit.ndarray import save

        params = self._collect_params_with_prefix()
        if deduplicate:
            reverse: dict[int, list[str]] = defaultdict(list)
            for key, param in params.items():
                reverse[id(param)].append(key)
            params = {names[0]: p for names, p in ((reverse[id(p)], p) for p in params.values())}
        save(filename, {key: param._reduce() for key, param in params.items()})

    def load_parameters(self, filename: str, ctx: Any = None, allow_missing: bool = False, ignore_extra: bool = False,
                        cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Load a file written by :meth:`save_parameters` (here or by MXNet 1.x).

        Parameters
        ----------
        allow_missing : bool
            Leave parameters the file lacks as they are (else an error names them).
        ignore_extra : bool
            Skip names the file has and this block does not (else an error).
        cast_dtype : bool
            Convert arrays whose dtype differs (to the parameter's with ``dtype_source='current'``).
        """
        from mxkit.ndarray import load

        loaded = load(filename)
        if not isinstance(loaded, dict):
            raise GluonError(f"{filename!r} holds an unnamed list of arrays, not parameters saved by save_parameters")
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        if not any("." in key for key in loaded):
            # the legacy format: full names (``dense0_weight``) as ParameterDict.save writes
            self.collect_params().load(filename, ctx, allow_missing, ignore_extra, self.prefix,
                                       cast_dtype=cast_dtype, dtype_source=dtype_source)
            return
        if not allow_missing:
            names_of: dict[int, list[str]] = defaultdict(list)
            for key, param in params.items():
                names_of[id(param)].append(key)
            for key, param in params.items():
                if not any(name in loaded for name in names_of[id(param)]):
                    raise GluonError(f"parameter {key!r} is missing in file {filename!r}, which contains "
                                     f"{sorted(loaded)}; set allow_missing=True to ignore missing parameters")
        for key, value in loaded.items():
            if key not in params:
                if not ignore_extra:
                    raise GluonError(f"parameter {key!r} loaded from file {filename!r} is not present in this block, "
                                     f"which has {sorted(params)}; set ignore_extra=True to ignore it")
                continue
            params[key]._load_init(value, ctx, cast_dtype=cast_dtype, dtype_source=dtype_source)

    def save(self, prefix: str) -> None:
        """Save the block tree's names and the parameters: ``<prefix>-model.json`` and
        ``<prefix>-model.params`` (MXNet 1.9.1's whole-model files; see :mod:`mxkit.gluon.block_save`)."""
        from mxkit.gluon.block_save import save_model

        save_model(self, prefix)

    def load(self, prefix: str) -> None:
        """Load what :meth:`save` wrote into this block, built by the same code in the same order."""
        from mxkit.gluon.block_save import load_model

        load_model(self, prefix)

    # legacy names
    def save_params(self, filename: str) -> None:
        """Deprecated: full-name format (``ParameterDict.save`` with this block's prefix stripped)."""
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename: str, ctx: Any = None, allow_missing: bool = False,
                    ignore_extra: bool = False) -> None:
        """Deprecated alias of :meth:`load_parameters`."""
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    # -- running ------------------------------------------------------------------------------

    def __call__(self, *args: Any) -> Any:
        for hook in self._forward_pre_hooks:
            hook(self, args)
        out = self.forward(*args)
        for hook in self._forward_hooks:
            hook(self, args, out)
        return out

    def forward(self, *args: Any) -> Any:
        """The computation; subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def summary(self, *inputs: Any) -> None:
        """Print each child's output shape and parameter count for ``inputs`` (not hybridized)."""
        hybridized = [b.name for b in self._self_and_descendants() if getattr(b, "_active", False)]
        if hybridized:
            raise HybridizedSummaryError(f"summary() cannot be called on a hybridized network ({hybridized[0]} "
                                         f"is); call hybridize(False) first")
        rows: list[tuple[str, Any, int]] = []

        def hook(block: Block, _inputs: Any, outputs: Any) -> None:
            from mxkit.ndarray import NDArray

            flat = _flatten_arrays(outputs, "output")
            if not all(isinstance(o, NDArray) for o in flat):
                return  # a traced call (deferred shape inference), not the run being summarised
            shapes = [o.shape for o in flat]
            count = sum(int(_prod(p.shape)) for p in block.params.values() if p.shape)
            rows.append((block.name, shapes[0] if len(shapes) == 1 else shapes, count))

        blocks = [self]
        while blocks:
            block = blocks.pop()
            block.register_forward_hook(hook)
            blocks.extend(block._children.values())
        try:
            self(*inputs)
        finally:
            blocks = [self]
            while blocks:
                block = blocks.pop()
                block._forward_hooks.remove(hook)
                blocks.extend(block._children.values())
        for name, shape, count in rows:
            print(f"{name:<40} {shape!s:<30} {count}")
        print(f"Total params: {sum(p for *_, p in rows)}")


def _prod(shape: Any) -> int:
    total = 1
    for d in shape:
        total *= int(d)
    return total


class HybridBlock(Block):
    """A block whose computation, ``hybrid_forward(F, x, *args, **params)``, works with
    ``F = mx.nd`` (imperative) and ``F = mx.sym`` (traced), so that :meth:`hybridize`
    can turn it into one planned graph."""

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__(prefix, params)
        self._active = False
        self._flags: dict[str, Any] = {}
        self._cached_graph: tuple[list[Any], Any] | None = None
        self._cached_runner: Any = None
        #: the nesting of the positional arguments of the call being hybridized (flatten_nested)
        self._in_fmt: Any = None
        self._graph_in_fmt: Any = None
        self._out_fmt: Any = 0
        self._out_index: list[int] = [0]
        #: (callback, monitor_all) of register_op_hook: the graph's executors report to it
        self._op_hook: tuple[Any, bool] | None = None

    def register_child(self, block: Block, name: str | None = None) -> None:
        if not isinstance(block, HybridBlock):
            raise GluonError(f"children of a HybridBlock must be HybridBlocks too, got {type(block).__name__}; "
                             f"use a Block as the parent instead")
        super().register_child(block, name)
        self._clear_cached_graph()

    def _clear_cached_graph(self) -> None:
        self._cached_graph = None
        self._cached_runner = None

    def hybridize(self, active: bool = True, static_alloc: bool = False, static_shape: bool = False,
                  memplan: str | None = None, **kwargs: Any) -> None:
        """Run this block as one graph from the next call on.

        Parameters
        ----------
        active : bool
            ``False`` goes back to imperative execution.
        static_alloc, static_shape : bool
            Accepted for MXNet compatibility: the graph's memory is always planned once per
            input signature and kept.
        memplan : str, optional
            The memory-planning strategy (default: config ``memplan``).
        """
        self._active = bool(active)
        self._flags = {"static_alloc": static_alloc, "static_shape": static_shape, "memplan": memplan, **kwargs}
        self._clear_cached_graph()
        super().hybridize(active, static_alloc=static_alloc, static_shape=static_shape, memplan=memplan, **kwargs)

    def register_op_hook(self, callback: Any, monitor_all: bool = False) -> None:
        """Install ``callback(name, op_name, NDArray)`` on this block's hybridized graph and on
        its descendants' (MXNet's op hook). After each run of the graph every operator node
        reports its outputs, named ``<node>_output`` (``dense0_fwd_output``); with
        ``monitor_all`` each node's inputs first, named ``<node>_<argument>``
        (``dense0_fwd_weight``). An imperative (not hybridized) block reports nothing, as in
        MXNet. ``callback=None`` removes the hook."""
        if callback is not None and not callable(callback):
            raise GluonError(f"register_op_hook needs a callable callback(name, op_name, array), got {callback!r}")
        self._op_hook = None if callback is None else (callback, bool(monitor_all))
        super().register_op_hook(callback, monitor_all)

    def cast(self, dtype: Any) -> None:
        self._clear_cached_graph()
        super().cast(dtype)

    def _get_graph(self, *args: Any) -> tuple[list[Any], Any]:
        from mxkit import symbol

        in_fmt = self._in_fmt if self._in_fmt is not None else [0] * len(args)
        if self._cached_graph is not None and self._graph_in_fmt != in_fmt:
            self._clear_cached_graph()  # called with another nesting of arguments: trace again
        if self._cached_graph is None:
            if not args:
                raise GluonError(f"{type(self).__name__}: a hybridized block needs at least one input")
            names = ["data"] if len(args) == 1 else [f"data{i}" for i in range(len(args))]
            inputs = [symbol.var(name) for name in names]
            params = {key: param.var() for key, param in self._reg_params.items()}
            nested, _ = regroup_nested(_with_nones(inputs, in_fmt), in_fmt)
            with self.name_scope():
                out = self.hybrid_forward(symbol, *nested, **params)
            outputs, self._out_fmt = flatten_nested(out)
            if len(outputs) == 1 and isinstance(self._out_fmt, int) and self._out_fmt > 1:
                outputs = [outputs[0][i] for i in range(self._out_fmt)]  # one Symbol of several outputs
            # a graph output listed twice (an LSTM step's h is its output and its first state) is
            # computed once: the graph gets unique outputs, forward repeats them where they were
            unique: dict[str, int] = {}
            self._out_index = [unique.setdefault(o.list_outputs()[0], len(unique)) for o in outputs]
            outputs = [o for i, o in enumerate(outputs) if self._out_index.index(self._out_index[i]) == i]
            self._out_single = False  # forward regroups the flat outputs with _out_fmt
            self._graph_in_fmt = in_fmt
            self._cached_graph = (inputs, symbol.Group(outputs) if len(outputs) > 1 else outputs[0])
        return self._cached_graph

    def infer_shape(self, *args: Any) -> None:
        """Fill the unknown parameter shapes from the shapes of ``args`` (flat: nested lists of
        arguments are passed as their arrays in order)."""
        inputs, out = self._get_graph(*args)
        shapes = {sym.name: tuple(arg.shape) for sym, arg in zip(inputs, args)}
        arg_shapes, _, aux_shapes = out.infer_shape(**shapes)
        known = dict(zip(out.list_arguments(), arg_shapes))
        known.update(zip(out.list_auxiliary_states(), aux_shapes))
        for param in self.collect_params().values():
            if param.name in known and known[param.name] is not None:
                param.shape = known[param.name]

    def _infer_by_running(self, args: tuple) -> bool:
        """Finish deferred initialisation by one imperative inference pass, in which every child
        infers its own shapes from the arrays it receives (a fused RNN layer's packed weights hide
        the input width from the graph's shape inference). False when that cannot be done."""
        from mxkit.ndarray import NDArray, autograd

        if getattr(self, "_running_to_infer", False) or not all(isinstance(a, NDArray) for a in args):
            return False
        in_fmt = self._in_fmt if self._in_fmt is not None else [0] * len(args)
        nested, _ = regroup_nested(_with_nones(list(args), in_fmt), in_fmt)
        blocks = [b for b in self._self_and_descendants() if isinstance(b, HybridBlock)]
        active = [b._active for b in blocks]
        self._running_to_infer = True
        try:
            for block in blocks:
                block._active = False
            with autograd.pause():
                self.forward(*nested)
        finally:
            self._running_to_infer = False
            for block, was in zip(blocks, active):
                block._active = was
        return True

    def _deferred_infer_shape(self, *args: Any) -> None:
        error: Exception | None = None
        try:
            self.infer_shape(*args)
        except Exception as exc:
            error = exc
        if error is None and all(p.shape and all(int(d) > 0 for d in p.shape)
                                 for p in self.collect_params().values()):
            return
        try:
            if self._infer_by_running(args):
                return
        except Exception as exc:
            error = error or exc
        if error is not None:
            raise GluonError(f"{type(self).__name__} {self.name}: deferred initialisation failed because the "
                             f"parameter shapes could not be inferred from inputs of shape "
                             f"{[tuple(a.shape) for a in args]}: {error}") from error

    def forward(self, x: Any, *args: Any) -> Any:
        from mxkit import ndarray, symbol
        from mxkit.ndarray.sparse_base import BaseSparseNDArray

        array_types = (ndarray.NDArray, BaseSparseNDArray)
        flat, in_fmt = flatten_nested([x, *args])
        arrays = [v for v in flat if isinstance(v, array_types)]
        has_symbol = any(isinstance(v, symbol.Symbol) for v in flat)
        if arrays and has_symbol:
            raise BlockInputError(f"{type(self).__name__} got both NDArrays and Symbols as inputs; pass NDArrays "
                                  f"to compute, or Symbols to build a graph, not both")
        if not arrays and not has_symbol:
            raise BlockInputError(f"{type(self).__name__} needs at least one NDArray or Symbol among its inputs, got "
                                  f"{[type(v).__name__ for v in flat]}")
        if has_symbol:
            params = {key: param.var() for key, param in self._reg_params.items()}
            with self.name_scope():
                return self.hybrid_forward(symbol, x, *args, **params)
        if self._active:
            others = sorted({type(v).__name__ for v in flat if v is not None and not isinstance(v, array_types)})
            if others:
                raise BlockInputError(f"a hybridized {type(self).__name__} takes (nested lists of) NDArrays and None, "
                                      f"got {', '.join(others)}; pass numbers as NDArrays, or give them to the "
                                      f"block's constructor")
            contexts = {a.context for a in arrays}
            if len(contexts) > 1:
                raise BlockInputError(f"a hybridized {type(self).__name__} runs on one device, but its inputs are on "
                                      f"{sorted(map(str, contexts))}; copy them to one with as_in_context()")
            self._in_fmt = self._check_input_format(in_fmt)
            from mxkit.gluon.cached_graph import run_hybridized

            # a hybridized graph computes on dense values: a sparse input (a csr batch) is fed
            # densified, as MXNet's CachedOp falls back to dense storage for such operators
            arrays = [a.tostype("default") if isinstance(a, BaseSparseNDArray) else a for a in arrays]
            outputs = run_hybridized(self, tuple(arrays))
            outputs = outputs if isinstance(outputs, list) else [outputs]
            return regroup_nested([outputs[i] for i in self._out_index], self._out_fmt)[0]
        ctx = arrays[0].context
        try:
            params = {key: param.data(ctx) for key, param in self._reg_params.items()}
        except DeferredInitializationError:
            self._in_fmt = in_fmt
            self._deferred_infer_shape(*[v for v in flat if v is not None])
            for param in self.collect_params().values():
                param._finish_deferred_init()
            params = {key: param.data(ctx) for key, param in self._reg_params.items()}
        return self.hybrid_forward(ndarray, x, *args, **params)

    def _check_input_format(self, in_fmt: Any) -> Any:
        """The input format to run with: ``in_fmt``, or the traced graph's when they differ only
        by trailing absent (None) arguments, which is how optional arguments left at their
        default look. Any other difference from the traced graph's arguments is an error, as
        in MXNet: the graph was traced for one structure of arguments."""
        traced = self._graph_in_fmt if self._cached_graph is not None else None
        if traced is None or traced == in_fmt:
            return in_fmt
        if isinstance(traced, list) and isinstance(in_fmt, list):
            short, long = (traced, in_fmt) if len(traced) < len(in_fmt) else (in_fmt, traced)
            if long[:len(short)] == short and all(f == -1 for f in long[len(short):]):
                return traced
        raise BlockInputError(f"{type(self).__name__} was hybridized for arguments of structure {traced} (0: an "
                              f"array, -1: None, a list: a nested list), and is now called with {in_fmt}; call it "
                              f"with the same structure, or hybridize() again to trace anew")

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        """The computation with ``F`` = ``mx.nd`` or ``mx.sym``; subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__} must implement hybrid_forward()")

    def export(self, path: str, epoch: int = 0, remove_amp_cast: bool = True) -> tuple[str, str]:
        """Write ``path-symbol.json`` and ``path-%04d.params`` (``arg:``/``aux:`` names), MXNet's
        checkpoint format, from the graph of the last hybridized call.

        Returns
        -------
        (str, str)
            The two file names.
        """
        from mxkit.ndarray import save

        if self._cached_graph is None:
            raise GluonError("export needs the graph: call hybridize() and run one forward pass first")
        sym = self._cached_graph[1]
        symbol_file = f"{path}-symbol.json"
        sym.save(symbol_file)
        arg_names = set(sym.list_arguments())
        aux_names = set(sym.list_auxiliary_states())
        arrays = {}
        for name, param in self.collect_params().items():
            if name in arg_names:
                arrays[f"arg:{name}"] = param._reduce()
            elif name in aux_names:
                arrays[f"aux:{name}"] = param._reduce()
        params_file = f"{path}-{epoch:04d}.params"
        save(params_file, arrays)
        return symbol_file, params_file

    def memory_plan(self) -> Any:
        """The memory plan of the bound graph of the last hybridized call (``None`` before one)."""
        runner = self._cached_runner
        return None if runner is None else runner.memory_plan()
