"""mxkit-symbol: declarative graphs, automatic differentiation and the executor.

``mx.sym`` / ``mx.symbol``::

    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=128, name="fc1")
    net = mx.sym.SoftmaxOutput(mx.sym.Activation(fc1, act_type="relu"), name="softmax")
    exe = net.simple_bind(mx.cpu(), data=(32, 784))

Every operator of the registry is available as ``mx.sym.<name>`` (looked up on first use).
"""

from __future__ import annotations

from typing import Any

from mxkit.symbol import _internal, contrib, image, linalg, random, sparse
from mxkit.symbol import cached_op as _cached_op  # noqa: F401  (registers mx.nd.CachedOp's implementation)
from mxkit.symbol import passes as _passes  # noqa: F401  (registers the graph-pass config keys)
from mxkit.symbol.choosers import histogram, split_v2
from mxkit.symbol.elementwise import hypot, maximum, minimum, pow, power
from mxkit.symbol.symbol import Group, Symbol, SymbolError, Variable, var

# MXNet's creation functions whose registry names are internal (``_zeros``...)
_RENAMED = {"zeros": "_zeros", "ones": "_ones", "full": "_full", "arange": "_arange"}
_functions: dict[str, Any] = {}


def full(shape: Any, val: Any, dtype: Any = None, **kwargs: Any) -> Symbol:
    """A symbol of ``shape`` filled with ``val`` (MXNet's ``mx.sym.full(shape, val, dtype=None)``:
    the fill value is the second argument, as in ``mx.nd.full``; float32 unless ``dtype`` is given)."""
    from mxkit.symbol.op import operator_function

    return operator_function("_full")(shape=shape, value=float(val), dtype=dtype or "float32", **kwargs)


def load(fname: str) -> Symbol:
    """Load a symbol from an MXNet JSON file (``model-symbol.json``)."""
    from mxkit.symbol.json_format import load as _load

    return _load(fname)


def load_json(json_str: str) -> Symbol:
    """Load a symbol from an MXNet JSON string."""
    from mxkit.symbol.json_format import from_json

    return from_json(json_str)


def fuse(symbol: Symbol, type_dict: dict | None = None, **shapes: Any) -> Symbol:
    """``symbol`` with its elementwise chains fused into ``_FusedElemwise`` nodes, given the input
    shapes (see :func:`mxkit.symbol.fusion.fuse_symbol`)."""
    from mxkit.symbol.fusion import fuse_symbol

    return fuse_symbol(symbol, type_dict, **shapes)


def __getattr__(name: str) -> Any:
    function = _functions.get(name)
    if function is not None:
        return function
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    function = operator_function(_RENAMED.get(name, name))
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol' has no attribute {name!r} (no operator of that name is "
                             f"registered)")
    _functions[name] = function
    return function


__all__ = ["Group", "Symbol", "SymbolError", "Variable", "_internal", "contrib", "full", "fuse", "image", "histogram",
           "hypot", "linalg", "load", "load_json", "maximum", "minimum", "pow", "power", "random", "sparse", "split_v2",
           "var"]
