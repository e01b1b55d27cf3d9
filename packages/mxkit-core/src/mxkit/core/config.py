"""Layered, typed configuration.

Layers, lowest first (docs/architecture.md, "Configuration"):

1. the defaults of the declared keys;
2. ``mxkit.toml`` in the working directory, or else ``[tool.mxkit]`` of its
   ``pyproject.toml``;
3. the environment, ``MXKIT_<KEY>`` (``MXKIT_ENGINE=naive``);
4. :func:`override` (a context manager, for tests and scoped changes);
5. the explicit argument of a call (``resolve(key, explicit=...)``).

Every value is validated when its layer is read: a bad value raises
:class:`~mxkit.core.errors.ConfigError` naming the key, the value, where it came from and
what would be right. Values naming a plugin (``engine``, ``memplan``, ``consistency``) are
checked against the plugin registries when they are used, because the registries are
only built on demand.

Keys are declared, never registered on import: every component and plugin yields
:class:`~mxkit.core.specs.OptionSpec` from the ``mxkit_options`` hook, and the table of
keys (:func:`option_table`) is collected from every installed plugin on first use. Only
then are the layers checked, so a key works whatever was imported first, and a key no
component declares, in a file or an ``MXKIT_*`` variable, fails with the closest known
names. ``MXKIT_*`` variables that are not configuration are listed in
:data:`NON_CONFIG_VARIABLES`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mxkit.core.errors import ConfigError
from mxkit.core.specs import OptionSpec

#: Environment variables named ``MXKIT_*`` that are not configuration keys: they are read
#: by the command line, the distributed launcher, the tests and the benchmarks for their
#: own purposes, so the check for misspelled ``MXKIT_*`` keys leaves them alone.
NON_CONFIG_VARIABLES: frozenset[str] = frozenset({
    # the distributed launcher (``mxkit launch``) tells each process its place in the job
    "MXKIT_RANK", "MXKIT_NUM_WORKERS", "MXKIT_NUM_SERVERS", "MXKIT_RAY_ADDRESS", "MXKIT_JOB_NAMESPACE",
    # mx.test_utils: where get_mnist reads its files
    "MXKIT_DATA_DIR",
    # reference interpreters for the comparison tests and the benchmarks
    "MXKIT_MXNET_PYTHON", "MXKIT_BENCH_MXNET_PYTHON", "MXKIT_BENCH_TORCH_PYTHON",
    # a marker the launcher's tests pass to their child processes
    "MXKIT_LAUNCH_TEST_MARKER",
})

#: The keys of mxkit-core itself (declared through the same hook as every component's,
#: by :mod:`mxkit.core.plugin`). They are also what the plugin manager reads while it is
#: being built, before any other component's keys are known.
CORE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("engine", "str", "threaded_per_device", "execution engine (a name from mxkit_engines)",
               plugin_kind="engine"),
    OptionSpec("cpu_workers", "int", 0, "worker threads per CPU device (0: automatic: one when a kernel plugin, "
               "such as mxkit-onednn, spreads each operation over the cores; else one per core)", minimum=0),
    OptionSpec("memplan", "str", "auto", "memory-planning strategy (a name from mxkit_memory_planners)",
               plugin_kind="planner"),
    OptionSpec("consistency", "str", "sequential",
               "KVStore consistency model (a name from mxkit_consistency_models)", plugin_kind="consistency"),
    OptionSpec("graph_passes", "list", ("prune", "fuse"), "graph optimization passes, in order"),
    OptionSpec("default_dtype", "str", "float32", "dtype of arrays created without one"),
    OptionSpec("disable_plugin_autoload", "bool", False,
               "load no outside plugin from entry points except those named by 'plugins' "
               "(mxkit's own components and plugins stay)"),
    OptionSpec("plugins", "list", (),
               "outside plugins (entry-point names) to load even when disable_plugin_autoload is set"),
    OptionSpec("trace_plugins", "bool", False, "log every plugin hook call"),
)

#: Kept for code written against the old name; a declared option is an OptionSpec.
Option = OptionSpec

_CORE_BY_NAME = {spec.name: spec for spec in CORE_OPTIONS}
_building = threading.local()


@dataclass(frozen=True)
class OptionTable:
    """Every declared key: its spec and the plugin that declared it."""

    specs: Mapping[str, OptionSpec]
    owners: Mapping[str, str]


_table: OptionTable | None = None
_table_lock = threading.RLock()


def forget_options() -> None:
    """Drop the collected option table (the plugin manager calls this when plugins change)."""
    global _table, _env_checked
    # no lock: the manager calls this while it is being built, and a thread collecting the
    # options holds _table_lock while it waits for the manager (taking it here could deadlock)
    _table = None
    _env_checked = None


def option_table() -> OptionTable:
    """Every declared key, collected from the ``mxkit_options`` hook of every plugin.

    While the plugin manager is being built only mxkit-core's own keys are known.
    """
    global _table
    table = _table
    if table is not None:
        return table
    if getattr(_building, "active", False):
        return OptionTable(_CORE_BY_NAME, dict.fromkeys(_CORE_BY_NAME, "mxkit-core"))
    with _table_lock:
        if _table is None:
            from mxkit.core.plugins import collect_options

            specs, owners = collect_options()
            _table = OptionTable(specs, owners)
        return _table


@contextmanager
def bootstrapping() -> Iterator[None]:
    """While the plugin manager is built: only core's keys, unknown ones not yet an error."""
    previous = getattr(_building, "active", False)
    _building.active = True
    try:
        yield
    finally:
        _building.active = previous


def _options() -> Mapping[str, OptionSpec]:
    return option_table().specs


def closest_names(name: str, known: Iterable[str]) -> list[str]:
    """The known names most like ``name`` (for "did you mean" in errors)."""
    import difflib

    return difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)


def unknown_key_message(name: str, known: Iterable[str], source: str, what: str = "config key") -> str:
    """``unknown config key 'engin' (from ...); did you mean 'engine'?`` plus the known keys."""
    known = sorted(known)
    close = closest_names(name, known)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {what} {name!r} (from {source}){hint} Known: {', '.join(known)}"


# -- file layer -------------------------------------------------------------------------

_file_cache: dict[Path, tuple[int, dict[str, Any], str]] = {}


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def _file_layer(directory: Path) -> tuple[dict[str, Any], str]:
    """The raw key/value table of the config file in ``directory`` and its name."""
    for filename, table_path in (("mxkit.toml", ()), ("pyproject.toml", ("tool", "mxkit"))):
        path = directory / filename
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        cached = _file_cache.get(path)
        if cached is not None and cached[0] == mtime:
            if not cached[2]:
                continue  # a pyproject.toml without [tool.mxkit], as last read
            return cached[1], cached[2]
        table: Any = _read_toml(path)
        for part in table_path:
            table = table.get(part, {}) if isinstance(table, dict) else {}
        if table_path and not table:
            # remembered too: parsing a project's pyproject.toml on every read costs milliseconds
            _file_cache[path] = (mtime, {}, "")
            continue
        label = f"{path}" + (" [tool.mxkit]" if table_path else "")
        values = dict(table)
        _file_cache[path] = (mtime, values, label)
        return values, label
    return {}, ""


# -- override layer ---------------------------------------------------------------------

_override_stack: list[dict[str, Any]] = []
_override_lock = threading.Lock()


@contextmanager
def override(**values: Any) -> Iterator[None]:
    """Set configuration values for the duration of a ``with`` block (all threads).

    >>> from mxkit.core import config
    >>> with config.override(engine="naive"):
    ...     config.get("engine")
    'naive'
    """
    layer = {key: _option(key, "override()").convert(value, "override()") for key, value in values.items()}
    with _override_lock:
        _override_stack.append(layer)
    try:
        yield
    finally:
        with _override_lock:
            _override_stack.remove(layer)


def _option(key: str, source: str, options: Mapping[str, OptionSpec] | None = None) -> OptionSpec:
    options = _options() if options is None else options
    try:
        return options[key]
    except KeyError:
        raise ConfigError(unknown_key_message(key, options, source)) from None


# The names of the MXKIT_* variables last checked, and how many variables there were:
# scanning the environment costs tens of microseconds, so it is redone only when the
# number of variables changes (a variable set or removed) or the options change.
_env_checked: tuple[int, int] | None = None


def check_environment(names: Iterable[str] | None = None) -> None:
    """Fail on an ``MXKIT_*`` variable that is neither a declared key nor a non-config variable.

    ``names`` are the variable names to check (an environment mapping will do; default:
    ``os.environ``).

    Raises
    ------
    ConfigError
        ``MXKIT_ENGNE: did you mean MXKIT_ENGINE?``, listing the known variables.
    """
    options = _options()
    known = {spec.env_var for spec in options.values()}
    for name in (names if names is not None else os.environ):
        if name.startswith("MXKIT_") and name not in known and name not in NON_CONFIG_VARIABLES:
            # compared without the common MXKIT_ prefix, which would make every name look close
            close = ["MXKIT_" + c for c in closest_names(name[6:], [k[6:] for k in known | NON_CONFIG_VARIABLES])]
            hint = f"did you mean {' or '.join(close)}?" if close else "it is not a configuration key"
            raise ConfigError(
                f"{name}: {hint} (environment variable {name} is set, but no installed mxkit component "
                f"declares a key {name[6:].lower()!r}). Configuration variables: {', '.join(sorted(known))}; "
                f"other mxkit variables: {', '.join(sorted(NON_CONFIG_VARIABLES))}"
            )


# -- the merged view --------------------------------------------------------------------


class Config(Mapping[str, Any]):
    """A snapshot of the configuration in force: values and where each came from."""

    def __init__(self, values: dict[str, Any], sources: dict[str, str]):
        self._values = values
        self._sources = sources

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def source(self, key: str) -> str:
        """Where the value of ``key`` came from (``"default"``, a file, ``environment MXKIT_ENGINE``...)."""
        return self._sources[key]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Config({body})"


def _check_process_environment(table: OptionTable) -> None:
    """:func:`check_environment` on ``os.environ``, and every MXKIT_* value converted, redone
    only when the number of variables or the option table changed (see ``_env_checked``)."""
    global _env_checked
    stamp = (id(table), len(os.environ))
    if stamp == _env_checked:
        return
    check_environment(os.environ)
    for opt in table.specs.values():
        raw = os.environ.get(opt.env_var)
        if raw is not None:
            opt.convert(raw, f"environment {opt.env_var}")
    _env_checked = stamp


# Converted values of the config file, per (path, mtime, option table): a file is
# validated once, not at every read.
_file_values_cache: dict[tuple[str, int, int], dict[str, Any]] = {}


def _file_values(directory: Path, table: OptionTable, bootstrap: bool) -> tuple[dict[str, Any], str]:
    """The config file's values, converted and validated, and its label (``""``: no file)."""
    raw_values, label = _file_layer(directory)
    if not label:
        return {}, ""
    cache_key = (label, _file_cache_mtime(label), id(table))
    if not bootstrap:
        cached = _file_values_cache.get(cache_key)
        if cached is not None:
            return cached, label
    source = f"file {label}"
    values = {}
    for key, raw in raw_values.items():
        if bootstrap and key not in table.specs:
            continue  # checked once every component's keys are known
        values[key] = _option(key, source, table.specs).convert(raw, source)
    if not bootstrap:
        if len(_file_values_cache) > 64:
            _file_values_cache.clear()
        _file_values_cache[cache_key] = values
    return values, label


def _file_cache_mtime(label: str) -> int:
    path = Path(label.removesuffix(" [tool.mxkit]"))
    cached = _file_cache.get(path)
    return cached[0] if cached is not None else -1


def load(directory: str | os.PathLike[str] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Merge every layer (except explicit arguments) into a validated :class:`Config`.

    Raises
    ------
    ConfigError
        A value is invalid for its key, or a file or ``MXKIT_*`` variable names a key no
        installed component declares (with the closest known names).
    """
    bootstrap = getattr(_building, "active", False)
    table = option_table()
    options = table.specs
    if environ is None:
        environ = os.environ
        if not bootstrap:
            _check_process_environment(table)
    elif not bootstrap:
        check_environment(environ)
    values = {key: opt.default for key, opt in options.items()}
    sources = dict.fromkeys(options, "default")

    file_values, label = _file_values(Path(directory) if directory is not None else Path.cwd(), table, bootstrap)
    for key, value in file_values.items():
        values[key] = value
        sources[key] = f"file {label}"

    for key, opt in options.items():
        raw_env = environ.get(opt.env_var)
        if raw_env is not None:
            source = f"environment {opt.env_var}"
            values[key] = opt.convert(raw_env, source)
            sources[key] = source

    with _override_lock:
        layers = list(_override_stack)
    for layer in layers:
        for key, value in layer.items():
            if key in options:
                values[key] = value
                sources[key] = "override()"
    return Config(values, sources)


def owner(key: str) -> str:
    """The plugin (and distribution) that declared ``key``, as ``mxkit info`` shows it."""
    table = option_table()
    _option(key, "a call", table.specs)
    return table.owners[key]


def get_config() -> Config:
    """The configuration in force now (all layers but explicit arguments)."""
    return load()


def get(key: str, explicit: Any = None) -> Any:
    """The value of ``key``: ``explicit`` if given (not None), else the layered value."""
    return resolve(key, explicit)[0]


def resolve(key: str, explicit: Any = None) -> tuple[Any, str]:
    """``(value, source)`` of ``key``, an explicit call argument winning over all layers."""
    bootstrap = getattr(_building, "active", False)
    table = option_table()
    opt = _option(key, "a call", table.specs)
    if explicit is not None:
        return opt.convert(explicit, "argument"), "argument"
    # One key through the layers, highest first: hot paths (an array created without a dtype
    # reads default_dtype) must not pay for every key. The whole file and the names and
    # values of the MXKIT_* variables are still checked, once per change.
    if not bootstrap:
        _check_process_environment(table)
    with _override_lock:
        layers = list(_override_stack)
    for layer in reversed(layers):
        if key in layer:
            return layer[key], "override()"
    file_values, label = _file_values(Path.cwd(), table, bootstrap)  # validated even when env wins
    raw_env = os.environ.get(opt.env_var)
    if raw_env is not None:
        source = f"environment {opt.env_var}"
        return opt.convert(raw_env, source), source
    if key in file_values:
        return file_values[key], f"file {label}"
    return opt.default, "default"


__all__ = [
    "CORE_OPTIONS",
    "NON_CONFIG_VARIABLES",
    "Config",
    "Option",
    "OptionTable",
    "check_environment",
    "closest_names",
    "get",
    "get_config",
    "load",
    "option_table",
    "override",
    "owner",
    "resolve",
]
