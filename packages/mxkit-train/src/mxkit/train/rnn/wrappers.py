"""Cells made of cells: stacks, bidirectional pairs, and the modifiers (dropout, zoneout,
residual connections), as MXNet 1.x's ``mx.rnn`` has them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit import symbol
from mxkit.core.errors import MXKitError
from mxkit.train.rnn.cells import BaseRNNCell, RNNParams, normalize_sequence


def _share_params(owner: BaseRNNCell, cell: BaseRNNCell) -> None:
    if not cell._own_params:
        raise MXKitError(f"cell {cell._prefix!r} already shares its parameters; a container given params= can "
                         f"only adopt cells that own theirs")
    cell.params._params.update(owner.params._params)
    owner.params._params.update(cell.params._params)


def _collect_params(owner: BaseRNNCell, cell: BaseRNNCell) -> None:
    """List ``cell``'s variables in ``owner``'s container too, as MXNet's containers do
    (``stack.params`` then names every variable of the stack)."""
    owner.params._params.update(cell.params._params)


class SequentialRNNCell(BaseRNNCell):
    """Cells stacked: each one's output is the next one's input.

    Parameters
    ----------
    params : RNNParams, optional
        Parameters shared by every added cell.
    """

    def __init__(self, params: RNNParams | None = None) -> None:
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells: list[BaseRNNCell] = []

    def add(self, cell: BaseRNNCell) -> None:
        """Append ``cell`` to the stack."""
        self._cells.append(cell)
        if self._override_cell_params:
            _share_params(self, cell)
        _collect_params(self, cell)

    @property
    def state_info(self) -> list:
        return [info for cell in self._cells for info in cell.state_info]

    def begin_state(self, **kwargs: Any) -> list:
        if self._modified:
            raise MXKitError("this SequentialRNNCell is wrapped by a modifier cell: use the modifier's begin_state")
        return [state for cell in self._cells for state in cell.begin_state(**kwargs)]

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        next_states: list = []
        position = 0
        for cell in self._cells:
            if isinstance(cell, BidirectionalCell):
                raise MXKitError("a SequentialRNNCell holding a BidirectionalCell cannot be stepped; use unroll")
            count = len(cell.state_info)
            inputs, state = cell(inputs, states[position:position + count])
            position += count
            next_states.extend(state)
        return inputs, next_states

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        self.reset()
        begin_state = self.begin_state() if begin_state is None else begin_state
        position = 0
        next_states: list = []
        for index, cell in enumerate(self._cells):
            count = len(cell.state_info)
            states = begin_state[position:position + count]
            position += count
            last = index == len(self._cells) - 1
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=states, layout=layout,
                                         merge_outputs=merge_outputs if last else None)
            next_states.extend(states)
        return inputs, next_states


class BidirectionalCell(BaseRNNCell):
    """One cell forward in time and one backward, outputs concatenated (unroll only).

    Parameters
    ----------
    l_cell, r_cell : BaseRNNCell
        The forward-in-time and backward-in-time cells.
    params : RNNParams, optional
    output_prefix : str, default 'bi_'
    """

    def __init__(self, l_cell: BaseRNNCell, r_cell: BaseRNNCell, params: RNNParams | None = None,
                 output_prefix: str = "bi_") -> None:
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            _share_params(self, l_cell)
            _share_params(self, r_cell)
        _collect_params(self, l_cell)
        _collect_params(self, r_cell)
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        raise MXKitError("a BidirectionalCell cannot be stepped (it needs the whole sequence); use unroll")

    @property
    def state_info(self) -> list:
        return [info for cell in self._cells for info in cell.state_info]

    def begin_state(self, **kwargs: Any) -> list:
        if self._modified:
            raise MXKitError("this BidirectionalCell is wrapped by a modifier cell: use the modifier's begin_state")
        return [state for cell in self._cells for state in cell.begin_state(**kwargs)]

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        l_cell, r_cell = self._cells
        split = len(l_cell.state_info)
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs, begin_state=states[:split], layout=layout,
                                            merge_outputs=merge_outputs)
        r_outputs, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)), begin_state=states[split:],
                                            layout=layout, merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = isinstance(l_outputs, symbol.Symbol) and isinstance(r_outputs, symbol.Symbol)
            if not merge_outputs:
                if isinstance(l_outputs, symbol.Symbol):
                    l_outputs = list(symbol.SliceChannel(l_outputs, axis=axis, num_outputs=length, squeeze_axis=1))
                if isinstance(r_outputs, symbol.Symbol):
                    r_outputs = list(symbol.SliceChannel(r_outputs, axis=axis, num_outputs=length, squeeze_axis=1))
        if merge_outputs:
            l_outputs = [l_outputs]
            r_outputs = [symbol.reverse(r_outputs, axis=axis)]
        else:
            r_outputs = list(reversed(r_outputs))
        outputs = [symbol.Concat(l_o, r_o, dim=1 + int(merge_outputs),
                                 name=f"{self._output_prefix}out" if merge_outputs else f"{self._output_prefix}t{i}")
                   for i, (l_o, r_o) in enumerate(zip(l_outputs, r_outputs))]
        return (outputs[0] if merge_outputs else outputs), l_states + r_states


class ModifierCell(BaseRNNCell):
    """A cell that changes another's behaviour; the base cell is then used only through it.

    Parameters
    ----------
    base_cell : BaseRNNCell
    """

    def __init__(self, base_cell: BaseRNNCell) -> None:
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self) -> RNNParams:
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self) -> list:
        return self.base_cell.state_info

    def begin_state(self, init_sym: Any = symbol.zeros, **kwargs: Any) -> list:
        if self._modified:
            raise MXKitError("this modifier cell is itself wrapped by another modifier: use the outer one")
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func=init_sym, **kwargs)
        finally:
            self.base_cell._modified = True

    def unpack_weights(self, args: dict) -> dict:
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args: dict) -> dict:
        return self.base_cell.pack_weights(args)


class DropoutCell(BaseRNNCell):
    """Dropout on the inputs (no state), for use between the layers of a stack.

    Parameters
    ----------
    dropout : float
        The fraction dropped.
    prefix : str, default 'dropout_'
    params : RNNParams, optional
    """

    def __init__(self, dropout: float, prefix: str = "dropout_", params: RNNParams | None = None) -> None:
        super().__init__(prefix, params)
        if not 0 <= dropout < 1:
            raise MXKitError(f"DropoutCell: dropout={dropout} must be in [0, 1)")
        self.dropout = dropout

    @property
    def state_info(self) -> list:
        return []

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, list(states)

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, symbol.Symbol):
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout, merge_outputs=merge_outputs)


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al. 2016): each unit keeps its previous value with some probability.

    Parameters
    ----------
    base_cell : BaseRNNCell
    zoneout_outputs, zoneout_states : float
        Probabilities of keeping the previous output and the previous states.
    """

    def __init__(self, base_cell: BaseRNNCell, zoneout_outputs: float = 0.0, zoneout_states: float = 0.0) -> None:
        from mxkit.train.rnn.fused import FusedRNNCell

        if isinstance(base_cell, FusedRNNCell):
            raise MXKitError("FusedRNNCell does not support zoneout; unfuse() it first")
        if isinstance(base_cell, BidirectionalCell):
            raise MXKitError("BidirectionalCell does not support zoneout (it cannot be stepped); apply zoneout to "
                             "its two cells instead")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output: Any = None

    def reset(self) -> None:
        super().reset()
        self.prev_output = None

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        next_output, next_states = self.base_cell(inputs, states)

        def keep_new(p: float, like: Any) -> Any:
            return symbol.Dropout(symbol.ones_like(like), p=p)

        prev_output = self.prev_output if self.prev_output is not None else symbol.zeros_like(next_output)
        output = (symbol.where(keep_new(self.zoneout_outputs, next_output), next_output, prev_output)
                  if self.zoneout_outputs != 0 else next_output)
        states = ([symbol.where(keep_new(self.zoneout_states, new), new, old) for new, old in zip(next_states, states)]
                  if self.zoneout_states != 0 else next_states)
        self.prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """Adds the cell's input to its output (Wu et al. 2016's residual connections).

    Parameters
    ----------
    base_cell : BaseRNNCell
    """

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        output, states = self.base_cell(inputs, states)
        output = symbol.elemwise_add(output, inputs, name=f"{output.name}_plus_residual")
        return output, states

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs)
        finally:
            self.base_cell._modified = True
        merge = isinstance(outputs, symbol.Symbol) if merge_outputs is None else merge_outputs
        inputs, _ = normalize_sequence(length, inputs, layout, merge)
        if merge:
            return symbol.elemwise_add(outputs, inputs, name=f"{outputs.name}_plus_residual"), states
        return [symbol.elemwise_add(o, i, name=f"{o.name}_plus_residual") for o, i in zip(outputs, inputs)], states


__all__ = ["BidirectionalCell", "DropoutCell", "ModifierCell", "ResidualCell", "SequentialRNNCell", "ZoneoutCell"]
