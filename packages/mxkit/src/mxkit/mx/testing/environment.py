"""Scoped environment variables (``environment``) and silenced stderr (``discard_stderr``).

mxkit reads its ``MXKIT_<KEY>`` configuration from the environment at each lookup, so most
keys take effect inside the block at once. A few values are read once and kept: the
process engine (``MXKIT_ENGINE``, ``MXKIT_CPU_WORKERS``) and the fused kernels' numexpr
mode (``MXKIT_FUSED_NUMEXPR``). ``environment`` switches those for the block and restores
them after, so that these ``MXKIT_*`` variables are in force inside the block. The plugin
manager reads ``MXKIT_DISABLE_PLUGIN_AUTOLOAD`` and ``MXKIT_TRACE_PLUGINS`` once, when it
is built; rebuilding it would drop plugins registered by hand, so ``environment`` warns
instead (``mxkit.core.plugins.reset_plugin_manager()`` applies them).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

from mxkit.core.errors import MXKitError

_PREFIX = "MXKIT_"


def _parse_arguments(args: tuple[Any, ...]) -> dict[str, str | None]:
    if len(args) == 1 and isinstance(args[0], Mapping):
        variables = dict(args[0])
    elif len(args) == 2:
        variables = {args[0]: args[1]}
    else:
        raise MXKitError(f"environment() takes one dict of names to values or a name and a value, got {len(args)} "
                         f"arguments {args!r}")
    for name, value in variables.items():
        if not isinstance(name, str) or not name:
            raise MXKitError(f"environment variable names are non-empty strings, got {name!r}")
        if value is not None and not isinstance(value, str):
            raise MXKitError(f"environment variable {name} = {value!r}: values are strings (or None to unset), "
                             f"e.g. {str(value)!r}")
    return variables


#: MXNet variables with an mxkit equivalent: MXNET_* -> (MXKIT_*, value translation or None)
MXNET_EQUIVALENTS: dict[str, tuple[str, dict[str, str] | None]] = {
    "MXNET_ENGINE_TYPE": ("MXKIT_ENGINE", {"NaiveEngine": "naive", "ThreadedEngine": "threaded",
                                           "ThreadedEnginePerDevice": "threaded_per_device"}),
    "MXNET_CPU_WORKER_NTHREADS": ("MXKIT_CPU_WORKERS", None),
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": ("MXKIT_EXEC_BULK_SIZE", None),
    "MXNET_BACKWARD_DO_MIRROR": ("MXKIT_BACKWARD_DO_MIRROR", None),
    "MXNET_ELIMINATE_COMMON_EXPR": ("MXKIT_ELIMINATE_COMMON_EXPR", None),
    "MXNET_KVSTORE_BIGARRAY_BOUND": ("MXKIT_KVSTORE_BIGARRAY_BOUND", None),
}


def _with_mxkit_equivalents(variables: dict[str, str | None]) -> dict[str, str | None]:
    """``variables`` plus the MXKIT_* equivalent of each mapped MXNET_* one (unless also given)."""
    result = dict(variables)
    for name, value in variables.items():
        if name not in MXNET_EQUIVALENTS:
            continue
        target, values = MXNET_EQUIVALENTS[name]
        if target in variables:
            continue  # an explicit MXKIT_* value wins
        if value is not None and values is not None:
            if value not in values:
                raise MXKitError(f"environment: {name}={value!r} has no mxkit equivalent; MXNet's values are "
                                 f"{', '.join(values)} (or set {target} directly)")
            value = values[value]
        result[target] = value
    return result


def _validate_config_values(variables: Mapping[str, str | None]) -> None:
    """Fail before changing anything when an ``MXKIT_<KEY>`` value is invalid for its key."""
    from mxkit.core import config

    by_variable = {option.env_var: option for option in config.option_table().specs.values()}
    config.check_environment([name for name, value in variables.items() if value is not None])
    for name, value in variables.items():
        option = by_variable.get(name)
        if option is not None and value is not None:
            option.convert(value, f"environment({name}=...)")


def _set(variables: Mapping[str, str | None]) -> None:
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _wait_for_engine() -> None:
    # operations pushed inside the block may still read the configuration: let them finish
    engine = sys.modules.get("mxkit.engine")
    if engine is not None and getattr(engine, "_process_engine", None) is not None:
        engine.wait_all()


def _switch_engine(stack: ExitStack) -> None:
    import mxkit.engine
    from mxkit.core import config

    previous = mxkit.engine.set_engine(config.get("engine"))
    stack.callback(mxkit.engine.set_engine, previous)


def _refresh_numexpr_mode(stack: ExitStack) -> None:
    module = sys.modules.get("mxkit.ndarray.ops.fused_elemwise")
    if module is None:
        return  # not imported yet: it will read the configuration on first use
    previous = getattr(module, "_mode")  # noqa: B009 (the module's cached mode, read through the module)
    setattr(module, "_mode", None)  # noqa: B010 (read the configuration again on next use)
    stack.callback(setattr, module, "_mode", previous)


def _warn_plugin_manager_key(name: str) -> None:
    if "mxkit.core.plugins" in sys.modules and sys.modules["mxkit.core.plugins"]._cached_manager.cache_info().currsize:
        warnings.warn(f"{name} is read when the plugin manager is built, which has happened already: it has no "
                      f"effect inside this environment() block; call mxkit.core.plugins.reset_plugin_manager() "
                      f"to rebuild the manager (plugins registered by hand are dropped)", UserWarning, stacklevel=4)


#: MXKIT_* variables whose value is read once and cached, and how to apply a new one
_CACHED: dict[str, Callable[[ExitStack], None]] = {
    "MXKIT_FUSED_NUMEXPR": _refresh_numexpr_mode,
}
#: variables that choose the process engine (its type and its CPU worker count)
_ENGINE_VARIABLES = ("MXKIT_ENGINE", "MXKIT_CPU_WORKERS")
#: variables read when the plugin manager is built
_PLUGIN_MANAGER_VARIABLES = ("MXKIT_DISABLE_PLUGIN_AUTOLOAD", "MXKIT_TRACE_PLUGINS")


@contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Set environment variables for a ``with`` block and restore them after.

    Called as ``environment("MXKIT_ENGINE", "naive")`` or ``environment({"A": "1", "B": None})``
    (None unsets a variable inside the block). ``MXKIT_*`` variables naming configuration
    keys are validated first and are in force inside the block, including those mxkit
    caches (the process engine, the numexpr mode). So that ported MXNet tests keep their
    meaning, the MXNet variables in :data:`MXNET_EQUIVALENTS` also set their ``MXKIT_*``
    counterpart (``MXNET_ENGINE_TYPE=NaiveEngine`` sets ``MXKIT_ENGINE=naive``); other
    ``MXNET_*`` variables mean nothing to mxkit (see the migration guide).

    Raises
    ------
    ConfigError
        When an ``MXKIT_<KEY>`` value is not valid for its key (nothing is changed then).
    MXKitError
        For arguments that are not a dict or a name and a value, or non-string values.
    """
    variables = _with_mxkit_equivalents(_parse_arguments(args))
    _validate_config_values(variables)
    snapshot = {name: os.environ.get(name) for name in variables}
    with ExitStack() as stack:
        _wait_for_engine()
        _set(variables)
        stack.callback(_set, snapshot)
        stack.callback(_wait_for_engine)
        changed = [name for name in variables if snapshot[name] != variables[name]]
        for name in changed:
            refresh = _CACHED.get(name)
            if refresh is not None:
                refresh(stack)
            if name in _PLUGIN_MANAGER_VARIABLES:
                _warn_plugin_manager_key(name)
        if any(name in _ENGINE_VARIABLES for name in changed):
            _switch_engine(stack)
        yield


@contextmanager
def discard_stderr() -> Iterator[None]:
    """Send file descriptor 2 to ``os.devnull`` inside the block (C-level output included)."""
    sys.stderr.flush()
    try:
        stderr_fileno = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        # stderr is not a real file (captured by a test runner): silence the Python object instead
        saved = sys.stderr
        with open(os.devnull, "w") as sink:
            sys.stderr = sink
            try:
                yield
            finally:
                sys.stderr = saved
        return
    saved_fd = os.dup(stderr_fileno)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), stderr_fileno)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved_fd, stderr_fileno)
    finally:
        os.close(saved_fd)


__all__ = ["MXNET_EQUIVALENTS", "discard_stderr", "environment"]
