"""``mx.sym.sparse``: the operators MXNet files under its sparse namespace (``dot``,
``elemwise_add``, ``square``, ``_square_sum``...), resolved from the operator registry.

Graphs run on dense values: a variable declared with ``stype="csr"`` or ``"row_sparse"``
takes sparse arrays as input (densified when bound or fed), and the executor gives a
``"row_sparse"`` variable a row_sparse gradient (see :mod:`mxkit.symbol.executor`).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    # MXNet files _sparse_retain as sparse.retain (its sparse namespace drops the prefix)
    function = operator_function(name) or operator_function(f"_sparse_{name}")
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol.sparse' has no attribute {name!r} (no operator of that "
                             f"name is registered)")
    globals()[name] = function
    return function
