"""Checkpoints of RNN models with the weights unpacked per gate, as MXNet 1.x writes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.train.model.checkpoint import load_checkpoint, save_checkpoint
from mxkit.train.rnn.cells import BaseRNNCell


def _as_list(cells: Any) -> list[BaseRNNCell]:
    return [cells] if isinstance(cells, BaseRNNCell) else list(cells)


def save_rnn_checkpoint(cells: Any, prefix: str, epoch: int, symbol: Any, arg_params: dict,
                        aux_params: dict) -> None:
    """Save like ``mx.model.save_checkpoint``, with each cell's weights unpacked first.

    Parameters
    ----------
    cells : BaseRNNCell or list of BaseRNNCell
        The cells whose weights to unpack (a fused cell's packed vector becomes per-gate arrays).
    prefix, epoch, symbol, arg_params, aux_params
        As ``mx.model.save_checkpoint``.
    """
    for cell in _as_list(cells):
        arg_params = cell.unpack_weights(arg_params)
    save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)


def load_rnn_checkpoint(cells: Any, prefix: str, epoch: int) -> tuple[Any, dict, dict]:
    """Load like ``mx.model.load_checkpoint``, packing each cell's weights back.

    Returns
    -------
    (symbol, arg_params, aux_params)
    """
    sym, arg_params, aux_params = load_checkpoint(prefix, epoch)
    for cell in _as_list(cells):
        arg_params = cell.pack_weights(arg_params)
    return sym, arg_params, aux_params


def do_rnn_checkpoint(cells: Any, prefix: str, period: int = 1) -> Callable[..., None]:
    """An epoch-end callback that calls :func:`save_rnn_checkpoint` every ``period`` epochs."""
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: dict | None = None, aux: dict | None = None) -> None:
        if (iter_no + 1) % period == 0:
            save_rnn_checkpoint(cells, prefix, iter_no + 1, sym, arg or {}, aux or {})

    return _callback


__all__ = ["do_rnn_checkpoint", "load_rnn_checkpoint", "save_rnn_checkpoint"]
