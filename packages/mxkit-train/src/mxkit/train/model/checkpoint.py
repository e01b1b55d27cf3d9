"""MXNet's checkpoint format: ``prefix-symbol.json`` and ``prefix-%04d.params``.

The parameter file is an ``mx.nd.save`` dictionary whose keys are ``arg:<name>`` for
arguments and ``aux:<name>`` for auxiliary states, byte-compatible with MXNet 1.x, so a
model trained by either loads in the other.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from typing import Any

from mxkit.core.errors import MXKitError


class CheckpointError(MXKitError, FileNotFoundError):
    """A checkpoint file is missing or does not hold what a checkpoint holds."""


def params_path(prefix: str, epoch: int) -> str:
    """``prefix-%04d.params``."""
    return f"{prefix}-{int(epoch):04d}.params"


def symbol_path(prefix: str) -> str:
    """``prefix-symbol.json``."""
    return f"{prefix}-symbol.json"


def saved_epochs(prefix: str) -> list[int]:
    """Epochs with a parameter file for ``prefix``, ascending."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"-(\d{4,})\.params$")
    epochs = []
    for path in glob.glob(glob.escape(prefix) + "-*.params"):
        match = pattern.search(os.path.basename(path))
        if match:
            epochs.append(int(match.group(1)))
    return sorted(epochs)


def _missing(path: str, prefix: str, what: str) -> CheckpointError:
    epochs = saved_epochs(prefix)
    found = (f"the epochs saved for {prefix!r} are: {', '.join(map(str, epochs))}" if epochs
             else f"no checkpoint matches {prefix!r}-*.params")
    return CheckpointError(f"{what} {path!r} does not exist; {found}")


def save_checkpoint(prefix: str, epoch: int, symbol: Any, arg_params: dict, aux_params: dict,
                    remove_amp_cast: bool = True) -> None:
    """Write a checkpoint (MXNet's ``mx.model.save_checkpoint``).

    Parameters
    ----------
    prefix : str
        Path prefix of the files.
    epoch : int
        Epoch number (the ``%04d`` of the parameter file).
    symbol : Symbol or None
        The network, written to ``prefix-symbol.json`` (skipped when None).
    arg_params, aux_params : dict of str to NDArray
        Parameters and auxiliary states.
    remove_amp_cast : bool
        Accepted for MXNet compatibility (mxkit graphs hold no AMP casts).
    """
    from mxkit.core.context import cpu
    from mxkit.ndarray import save

    if symbol is not None:
        symbol.save(symbol_path(prefix))
    arrays = {f"arg:{name}": value.as_in_context(cpu()) for name, value in arg_params.items()}
    arrays.update({f"aux:{name}": value.as_in_context(cpu()) for name, value in (aux_params or {}).items()})
    path = params_path(prefix, epoch)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    save(path, arrays)
    logging.info('Saved checkpoint to "%s"', path)


def load_params(prefix: str, epoch: int) -> tuple[dict, dict]:
    """``(arg_params, aux_params)`` of ``prefix-%04d.params`` (MXNet's ``mx.model.load_params``).

    Raises
    ------
    CheckpointError
        When the file is missing (naming the epochs that exist) or a key lacks ``arg:``/``aux:``.
    """
    from mxkit.ndarray import load

    path = params_path(prefix, epoch)
    if not os.path.exists(path):
        raise _missing(path, prefix, "parameter file")
    saved = load(path)
    if isinstance(saved, list):
        if saved:
            raise CheckpointError(f"{path!r} holds an unnamed list of arrays, not a checkpoint's "
                                  f"'arg:'/'aux:' dictionary")
        saved = {}
    if not saved:
        logging.warning("Params file '%s' is empty", path)
    arg_params, aux_params = {}, {}
    for key, value in saved.items():
        kind, _, name = key.partition(":")
        if kind == "arg" and name:
            arg_params[name] = value
        elif kind == "aux" and name:
            aux_params[name] = value
        else:
            raise CheckpointError(f"{path!r} has the key {key!r}; a checkpoint's keys are 'arg:<name>' or "
                                  f"'aux:<name>'")
    return arg_params, aux_params


def load_checkpoint(prefix: str, epoch: int) -> tuple[Any, dict, dict]:
    """``(symbol, arg_params, aux_params)`` of a checkpoint (MXNet's ``mx.model.load_checkpoint``)."""
    from mxkit.symbol import load

    path = symbol_path(prefix)
    if not os.path.exists(path):
        raise _missing(path, prefix, "symbol file")
    symbol = load(path)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params


__all__ = ["CheckpointError", "load_checkpoint", "load_params", "save_checkpoint", "saved_epochs"]
