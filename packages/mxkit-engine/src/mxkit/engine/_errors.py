"""Error helpers shared by every engine: how a failed operation is reported.

An exception raised by an operation is wrapped in :class:`~mxkit.core.errors.EngineError`
whose message names the operation and the original error, and whose ``__cause__`` is the
original exception (so its traceback is printed as "The above exception was the direct
cause..."). The wrapper carries ``op_name`` and ``original`` for programs that want them.
"""

from __future__ import annotations

from mxkit.core.errors import EngineError


def operation_failed(op_name: object, original: BaseException) -> EngineError:
    """Return the :class:`EngineError` reporting that ``op_name`` raised ``original``.

    Parameters
    ----------
    op_name : str or None
        The name given at push (``None`` for an unnamed operation).
    original : BaseException
        What the operation raised; it becomes ``__cause__`` of the returned error.
    """
    label = repr(op_name) if op_name is not None else "<unnamed>"
    error = EngineError(f"engine operation {label} failed: {type(original).__name__}: {original}")
    error.op_name = op_name  # type: ignore[attr-defined]
    error.original = original  # type: ignore[attr-defined]
    error.__cause__ = original
    return error


def first_of_failures(failures: list[tuple[object, BaseException]]) -> EngineError:
    """The :class:`EngineError` ``wait_all`` raises for ``failures`` ((op name, exception)
    pairs in failure order): the first one, with the others counted and named."""
    op_name, original = failures[0]
    error = operation_failed(op_name, original)
    if len(failures) > 1:
        others = [repr(name) if name is not None else "<unnamed>" for name, _ in failures[1:]]
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        error.args = (f"{error.args[0]} (and {len(others)} more failed operation(s): {shown})",)
    error.others = failures[1:]  # type: ignore[attr-defined]
    return error


def raise_operation_error(op_name: object, original: BaseException) -> None:
    """Raise :func:`operation_failed` chained to ``original``."""
    raise operation_failed(op_name, original) from original


def bad_callable(fn: object, what: str) -> EngineError:
    """The error for a non-callable pushed as an operation."""
    return EngineError(f"{what} needs a callable operation, got {fn!r} of type {type(fn).__name__}")


def bad_priority(priority: object) -> EngineError:
    """The error for a priority that is not an int."""
    return EngineError(f"priority must be an int (higher runs first), got {priority!r}")


def bad_var(value: object, engine_name: str) -> EngineError:
    """The error for something in ``reads``/``writes`` that is not a var of this engine."""
    return EngineError(
        f"reads and writes must hold vars made by this {engine_name} engine's new_var(), got {value!r} "
        f"of type {type(value).__name__}"
    )


def written_at_fork(var: object) -> EngineError:
    """The error a child process gets for reading a var whose write was pending at the fork."""
    return EngineError(
        f"{var!r} was still being written by an operation of the parent process when it called "
        f"os.fork(), so its contents in the child are undefined; wait for it (e.g. mx.nd.waitall()) "
        f"before forking, or overwrite it in the child"
    )


def bad_var_list(value: object, which: str) -> EngineError:
    """The error for ``reads``/``writes`` that is not a tuple or list of vars."""
    return EngineError(f"{which} must be a tuple or list of vars, got {value!r} of type {type(value).__name__}")


def deleted_var(var: object) -> EngineError:
    """The error for using a var after :meth:`delete_var`."""
    return EngineError(f"{var!r} was deleted with delete_var(); make a new one with new_var()")
