"""``mx.contrib.autograd``: MXNet's first autograd interface (0.11), kept by MXNet 1.x beside
``mx.autograd`` and still used by older code: ``train_section``/``test_section`` scopes that
switch recording and training together, ``mark_variables``, ``backward``/``compute_gradient``
over a list of heads, and the function transformers ``grad_and_loss`` and ``grad``.

Everything runs on :mod:`mxkit.ndarray.autograd`; only the calling conventions are MXNet's
older ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray import autograd as _autograd
from mxkit.ndarray import zeros_like
from mxkit.ndarray.ndarray import NDArray


def set_is_training(is_train: bool) -> bool:
    """Switch recording and training mode together; returns the previous state."""
    previous = bool(_autograd.set_training(bool(is_train)))
    _autograd.set_recording(bool(is_train))
    return previous


class TrainingStateScope:
    """A ``with`` scope that sets recording and training to ``enter_state`` and restores them."""

    def __init__(self, enter_state: bool):
        self._enter_state = bool(enter_state)
        self._prev: bool | None = None

    def __enter__(self) -> TrainingStateScope:
        self._prev = set_is_training(self._enter_state)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._prev is not None and self._prev != self._enter_state:
            set_is_training(self._prev)


def train_section() -> TrainingStateScope:
    """A scope that records operations in training mode (``mx.autograd.record()`` today)."""
    return TrainingStateScope(True)


def test_section() -> TrainingStateScope:
    """A scope that stops recording, in inference mode."""
    return TrainingStateScope(False)


def mark_variables(variables: Sequence[NDArray], gradients: Sequence[NDArray],
                   grad_reqs: str | Sequence[str] = "write") -> None:
    """Attach ``gradients`` as the gradient buffers of ``variables`` (see ``mx.autograd.mark_variables``)."""
    _autograd.mark_variables(list(variables), list(gradients), grad_reqs)


def backward(outputs: Sequence[NDArray], out_grads: Sequence[NDArray | None] | None = None,
             retain_graph: bool = False) -> None:
    """Differentiate the list ``outputs`` (with head gradients ``out_grads``, default ones)."""
    if not isinstance(outputs, (list, tuple)):
        raise MXKitError(f"contrib.autograd.backward: outputs must be a list or tuple of NDArrays, got "
                         f"{type(outputs).__name__}")
    if out_grads is not None and len(out_grads) != len(outputs):
        raise MXKitError(f"contrib.autograd.backward: {len(out_grads)} out_grads for {len(outputs)} outputs; "
                         f"give one per output (None for ones)")
    _autograd.backward(list(outputs), None if out_grads is None else list(out_grads), retain_graph=retain_graph)


def compute_gradient(outputs: Sequence[NDArray]) -> None:
    """``backward(outputs)`` (MXNet's deprecated name)."""
    backward(outputs)


def _chosen(args: tuple[Any, ...], argnum: int | list[int] | None) -> list[Any]:
    if argnum is None:
        chosen = list(args)
    else:
        indices = argnum if isinstance(argnum, list) else [argnum]
        chosen = [args[i] for i in indices]
    for value in chosen:
        if not isinstance(value, NDArray):
            raise MXKitError(f"contrib.autograd: the arguments to differentiate must be NDArrays, got "
                             f"{type(value).__name__}")
    return chosen


def grad_and_loss(func: Callable[..., Any], argnum: int | list[int] | None = None) -> Callable[..., Any]:
    """A function returning ``(gradients of the chosen arguments, func(*args))``."""

    @functools.wraps(func)
    def wrapped(*args: Any) -> tuple[list[NDArray], Any]:
        variables = _chosen(args, argnum)
        grads = [zeros_like(x) for x in variables]
        mark_variables(variables, grads)
        with train_section():
            outputs = func(*args)
        compute_gradient([outputs] if isinstance(outputs, NDArray) else outputs)
        return grads, outputs

    return wrapped


def grad(func: Callable[..., Any], argnum: int | list[int] | None = None) -> Callable[..., Any]:
    """A function returning the gradients of ``func`` in the chosen arguments."""
    grad_with_loss_func = grad_and_loss(func, argnum)

    @functools.wraps(grad_with_loss_func)
    def wrapped(*args: Any) -> list[NDArray]:
        grads: list[NDArray] = grad_with_loss_func(*args)[0]
        return grads

    return wrapped


__all__ = ["TrainingStateScope", "backward", "compute_gradient", "grad", "grad_and_loss", "mark_variables",
           "set_is_training", "test_section", "train_section"]
