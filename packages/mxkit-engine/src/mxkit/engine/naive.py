"""The naive engine: every operation runs at push, on the pushing thread (for debugging).

MXNet's ``NaiveEngine``: no worker threads, no queues, so a failing operation raises at
its push with the caller's stack intact, and a debugger steps straight into it. An
asynchronous operation is started at push and the push waits for its ``on_complete``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from mxkit.core.context import Context
from mxkit.core.errors import EngineError
from mxkit.engine import _errors

# How often a wait for an asynchronous completion wakes to let Ctrl-C through.
_WAIT_SLICE_S = 0.05

_var_ids = itertools.count()


class NaiveVar:
    """A variable of the naive engine: only a counter of completed writes.

    Attributes
    ----------
    version : int
        Number of completed write operations on this var.
    name : str or None
        The name given to :meth:`NaiveEngine.new_var` (for messages).
    """

    __slots__ = ("__weakref__", "_deleted", "_engine", "id", "name", "version")

    def __init__(self, engine: NaiveEngine, name: str | None = None):
        self._engine = engine
        self._deleted = False
        self.id = next(_var_ids)
        self.name = name
        self.version = 0

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<naive var {self.id}{label} version={self.version}>"


class _AsyncCompletion:
    """The ``on_complete`` callable handed to an asynchronous operation."""

    __slots__ = ("done", "error", "name")

    def __init__(self, name: object):
        self.name = name
        self.done = threading.Event()
        self.error: BaseException | None = None

    def __call__(self, error: BaseException | None = None) -> None:
        if self.done.is_set():
            raise EngineError(f"on_complete of operation {self.name!r} was called twice; call it exactly once")
        if error is not None and not isinstance(error, BaseException):
            error = EngineError(f"operation {self.name!r} completed with a non-exception error value {error!r}")
        self.error = error
        self.done.set()


class NaiveEngine:
    """Runs each operation immediately on the caller's thread.

    Parameters
    ----------
    **options
        Accepted for interface compatibility with the threaded engines and ignored
        except for unknown names, which raise :class:`~mxkit.core.errors.EngineError`.
    """

    name = "naive"

    def __init__(self, **options: Any):
        if options:
            raise EngineError(f"the naive engine takes no options, got {sorted(options)}")
        self._closed = False

    # -- vars --------------------------------------------------------------------------

    def new_var(self, name: str | None = None) -> NaiveVar:
        """Return a new variable (its ``version`` starts at 0)."""
        return NaiveVar(self, name)

    def delete_var(self, var: NaiveVar, on_delete: Callable[[], None] | None = None) -> None:
        """Delete ``var`` (here: at once, since nothing is ever pending) and call ``on_delete``."""
        self._check_var(var)
        if on_delete is not None and not callable(on_delete):
            raise _errors.bad_callable(on_delete, "delete_var(on_delete=...)")
        var._deleted = True
        if on_delete is not None:
            try:
                on_delete()
            except Exception as exc:
                _errors.raise_operation_error("delete_var", exc)

    # -- pushing -----------------------------------------------------------------------

    def push(self, fn: Callable[[], Any], reads: Any = (), writes: Any = (), ctx: Context | None = None,
             priority: int = 0, name: str | None = None, copy: bool = False) -> None:
        """Run ``fn()`` now; then count a completed write on every var in ``writes``.

        Raises
        ------
        EngineError
            If ``fn`` raised (chained to the original exception), or an argument is wrong.
        """
        if not callable(fn):
            raise _errors.bad_callable(fn, "push")
        written = self._check_args(reads, writes, ctx, priority)
        try:
            fn()
        except Exception as exc:
            _errors.raise_operation_error(name, exc)
        for var in written:
            var.version += 1

    def push_async(self, fn: Callable[[Callable[..., None]], Any], reads: Any = (), writes: Any = (),
                   ctx: Context | None = None, priority: int = 0, name: str | None = None,
                   copy: bool = False) -> None:
        """Start ``fn(on_complete)`` now and wait until it calls ``on_complete()``.

        ``on_complete(exc)`` reports a failure, raised here as an EngineError.
        """
        if not callable(fn):
            raise _errors.bad_callable(fn, "push_async")
        written = self._check_args(reads, writes, ctx, priority)
        completion = _AsyncCompletion(name)
        try:
            fn(completion)
        except Exception as exc:
            if not completion.done.is_set():
                completion(exc)
        while not completion.done.wait(_WAIT_SLICE_S):
            pass
        if completion.error is not None:
            _errors.raise_operation_error(name, completion.error)
        for var in written:
            var.version += 1

    # -- waiting -----------------------------------------------------------------------

    def wait_for_var(self, var: NaiveVar) -> None:
        """Nothing is ever pending on the naive engine: checks ``var`` and returns."""
        self._check_var(var)

    def wait_all(self) -> None:
        """Nothing is ever pending on the naive engine: returns at once."""

    def shutdown(self, timeout: float | None = None) -> None:
        """Nothing to stop; later pushes still work (kept for interface symmetry)."""

    @property
    def pending(self) -> int:
        """Operations pushed and not yet complete (always 0 here)."""
        return 0

    # -- checks ------------------------------------------------------------------------

    def _check_var(self, var: object) -> None:
        if type(var) is not NaiveVar or var._engine is not self:
            raise _errors.bad_var(var, self.name)
        if var._deleted:
            raise _errors.deleted_var(var)

    def _check_args(self, reads: Any, writes: Any, ctx: object, priority: object) -> list[NaiveVar]:
        if type(reads) not in (tuple, list):
            raise _errors.bad_var_list(reads, "reads")
        if type(writes) not in (tuple, list):
            raise _errors.bad_var_list(writes, "writes")
        for var in reads:
            self._check_var(var)
        written: list[NaiveVar] = []
        for var in writes:
            self._check_var(var)
            if var not in written:
                written.append(var)
        if ctx is not None and not isinstance(ctx, Context):
            raise EngineError(f"ctx must be an mxkit.core.Context or None, got {ctx!r}")
        if type(priority) is not int:
            raise _errors.bad_priority(priority)
        return written

    def __repr__(self) -> str:
        return "<NaiveEngine>"
