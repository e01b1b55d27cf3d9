"""``SymbolBlock``: a Block made from a Symbol (an exported or hand-built graph)."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock
from mxkit.gluon.parameter import GluonError, ParameterDict, StorageTypeError
from mxkit.ndarray.ndarray import STORAGE_TYPE_STR_TO_ID


def _common_prefix(names: list[str]) -> str:
    """The longest string every name starts with (character by character, as MXNet computes it)."""
    if not names:
        return ""
    prefix = names[0]
    for name in names[1:]:
        length = 0
        while length < min(len(prefix), len(name)) and prefix[length] == name[length]:
            length += 1
        prefix = prefix[:length]
    return prefix


class SymbolBlock(HybridBlock):
    """Run the graph ``outputs`` with ``inputs`` as its data; every other argument and
    auxiliary state becomes a parameter named as in the graph.

    Parameters
    ----------
    outputs : Symbol or list of Symbol
    inputs : Symbol or list of Symbol
        The variables fed at call time, in call order.
    params : ParameterDict, optional
        Parameters to share.
    """

    def __init__(self, outputs: Any, inputs: Any, params: ParameterDict | None = None) -> None:
        from mxkit import symbol

        super().__init__(prefix="", params=None)
        self._prefix = ""
        self._params = ParameterDict("", params)
        inputs = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        outputs_list = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
        for item in inputs:
            if not isinstance(item, symbol.Symbol) or len(item.list_outputs()) != 1 or item.get_children() is not None:
                raise GluonError(f"SymbolBlock inputs must be variables (mx.sym.var), got {item!r}")
        out = symbol.Group(outputs_list) if len(outputs_list) > 1 else outputs_list[0]
        input_names = [i.name for i in inputs]
        missing = [name for name in input_names if name not in out.list_inputs()]
        if missing:
            raise GluonError(f"SymbolBlock: inputs {missing} are not used by the graph, whose inputs are "
                             f"{out.list_inputs()}")
        # MXNet refuses a row_sparse variable as a SymbolBlock parameter: a graph's parameters are
        # read whole (data()), and a row_sparse one is read by rows through its Trainer
        row_sparse_id = str(STORAGE_TYPE_STR_TO_ID["row_sparse"])
        attrs = out.attr_dict()
        for name in out.list_arguments():
            if name not in input_names and attrs.get(name, {}).get("__storage_type__") == row_sparse_id:
                raise StorageTypeError(f"SymbolBlock does not support parameter {name!r} because its storage type "
                                       f"is 'row_sparse'; declare the variable without stype, or use a HybridBlock "
                                       f"with an Embedding(sparse_grad=True) for row-sparse gradients")
        for name in out.list_arguments():
            if name not in input_names:
                self.params.get(name, allow_deferred_init=True)
        for name in out.list_auxiliary_states():
            if name not in input_names:
                self.params.get(name, grad_req="null", allow_deferred_init=True)
        self._graph = ([symbol.var(name) for name in input_names], out)
        self._cached_graph = self._graph
        self._out_single = len(out.list_outputs()) == 1
        # MXNet 1.6+'s structural names: the parameters' names less the prefix they all share,
        # so that save_parameters/load_parameters match between two instances whose graphs were
        # made with different global name counters (net0_... and net1_...)
        shared = len(_common_prefix(list(self._params.keys())))
        self._reg_params = {key[shared:]: value for key, value in self._params.items()}
        self._active = True

    @staticmethod
    def imports(symbol_file: str, input_names: Any, param_file: str | None = None, ctx: Any = None,
                allow_missing: bool = False, ignore_extra: bool = False) -> SymbolBlock:
        """Load ``prefix-symbol.json`` (and its ``.params``) as written by ``export`` or
        MXNet's ``save_checkpoint``.

        Parameters
        ----------
        input_names : str or list of str
            The data variables.
        """
        from mxkit import symbol

        sym = symbol.load(symbol_file)
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        block = SymbolBlock(sym, [symbol.var(name) for name in names])
        if param_file is not None:
            block.collect_params().load(param_file, ctx, allow_missing, ignore_extra, cast_dtype=True,
                                        dtype_source="saved")
        return block

    def _get_graph(self, *args: Any) -> tuple[list[Any], Any]:
        return self._graph  # given, not traced

    def _clear_cached_graph(self) -> None:
        self._cached_graph = self._graph if hasattr(self, "_graph") else None
        self._cached_runner = None

    def forward(self, x: Any, *args: Any) -> Any:
        from mxkit import ndarray

        if isinstance(x, ndarray.NDArray):
            from mxkit.gluon.cached_graph import run_hybridized

            return run_hybridized(self, (x, *args))
        inputs, out = self._graph
        given = (x, *args)
        if len(given) != len(inputs):
            raise GluonError(f"SymbolBlock takes {len(inputs)} inputs ({[i.name for i in inputs]}), got {len(given)}")
        # symbolic use (inside a parent being traced): the graph with the given symbols as its inputs
        return out(**{symbol.name: value for symbol, value in zip(inputs, given)})

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        raise GluonError("SymbolBlock runs its graph; it has no hybrid_forward")
