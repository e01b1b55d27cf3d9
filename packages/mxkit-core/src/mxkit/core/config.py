"""Layered, typed configuration.

Layers, lowest first (DESIGN §3):

1. built-in defaults (the :data:`OPTIONS` table);
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
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mxkit.core.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Option:
    """One configuration key: its type, default, documentation and constraints.

    ``kind`` is one of ``"str"``, ``"int"``, ``"float"``, ``"bool"``, ``"list"`` (of
    strings). ``plugin_kind`` names the registry whose names are the valid choices.
    """

    key: str
    kind: str
    default: Any
    doc: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    plugin_kind: str | None = None

    @property
    def env_var(self) -> str:
        """The environment variable of this key (``MXKIT_`` + upper-case key)."""
        return "MXKIT_" + self.key.upper()

    def convert(self, value: Any, source: str) -> Any:
        """Return ``value`` converted to this option's type, or raise ConfigError."""
        try:
            converted = self._convert(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"config key {self.key!r} = {value!r} (from {source}) is not a valid {self.kind}"
                + self._hint()
            ) from None
        if self.choices is not None:
            bad = [v for v in (converted if self.kind == "list" else [converted]) if v not in self.choices]
            if bad:
                raise ConfigError(
                    f"config key {self.key!r} = {value!r} (from {source}) is not allowed"
                    + self._hint()
                )
        if self.minimum is not None and converted < self.minimum:
            raise ConfigError(
                f"config key {self.key!r} = {value!r} (from {source}) must be >= {self.minimum}"
            )
        return converted

    def _hint(self) -> str:
        if self.choices is not None:
            return f"; choices: {', '.join(self.choices)}"
        return f"; expected a {self.kind}, e.g. {self.default!r}"

    def _convert(self, value: Any) -> Any:
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise ValueError(value)
        if self.kind == "int":
            if isinstance(value, bool) or isinstance(value, float):
                raise TypeError(value)
            return int(value)
        if self.kind == "float":
            if isinstance(value, bool):
                raise TypeError(value)
            return float(value)
        if self.kind == "list":
            if isinstance(value, str):
                return tuple(p.strip().lower() for p in value.split(",") if p.strip())
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return tuple(v.strip().lower() for v in value)
            raise TypeError(value)
        if not isinstance(value, str):
            raise TypeError(value)
        value = value.strip()
        return value.lower() if self.plugin_kind or self.choices else value


OPTIONS: dict[str, Option] = {}
_options_lock = threading.Lock()


def register_option(option: Option) -> Option:
    """Add a configuration key (components call this for their own keys).

    Registering the same key twice with an identical definition is a no-op; a
    conflicting definition is an error.
    """
    with _options_lock:
        existing = OPTIONS.get(option.key)
        if existing is not None and existing != option:
            raise ConfigError(f"config key {option.key!r} is already defined differently: {existing}")
        OPTIONS[option.key] = option
    return option


for _opt in (
    Option("engine", "str", "threaded_per_device", "execution engine (a name from mxkit_engines)",
           plugin_kind="engine"),
    Option("cpu_workers", "int", 0, "worker threads per CPU device (0: one per core)", minimum=0),
    Option("memplan", "str", "auto", "memory-planning strategy (a name from mxkit_memory_planners)",
           plugin_kind="planner"),
    Option("consistency", "str", "sequential",
           "KVStore consistency model (a name from mxkit_consistency_models)",
           plugin_kind="consistency"),
    Option("graph_passes", "list", ("prune", "fuse"), "graph optimization passes, in order"),
    Option("default_dtype", "str", "float32", "dtype of arrays created without one"),
    Option("seed", "int", -1, "global random seed at start-up (-1: from the OS)", minimum=-1),
    Option("kvstore_bigarray_bound", "int", 1_000_000,
           "arrays with at least this many elements are split across servers", minimum=1),
    Option("staleness", "int", 1,
           "dist_ssp's bound: no pull reads a value more than this many rounds stale", minimum=0),
    Option("kvstore_timeout", "float", 300.0,
           "seconds a dist_* round, pull or barrier waits for missing workers before failing", minimum=0.001),
    Option("disable_plugin_autoload", "bool", False,
           "do not load third-party plugins from entry points"),
    Option("trace_plugins", "bool", False, "log every plugin hook call"),
    Option("profiler_autostart", "bool", False, "start the profiler at import"),
):
    register_option(_opt)


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
            return cached[1], cached[2]
        table: Any = _read_toml(path)
        for part in table_path:
            table = table.get(part, {}) if isinstance(table, dict) else {}
        if table_path and not table:
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


def _option(key: str, source: str) -> Option:
    try:
        return OPTIONS[key]
    except KeyError:
        raise ConfigError(
            f"unknown config key {key!r} (from {source}); known keys: {', '.join(sorted(OPTIONS))}"
        ) from None


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
        """Where the value of ``key`` came from (``"default"``, a file, ``MXKIT_X``...)."""
        return self._sources[key]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Config({body})"


def load(directory: str | os.PathLike[str] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Merge every layer (except explicit arguments) into a validated :class:`Config`."""
    environ = os.environ if environ is None else environ
    values = {key: opt.default for key, opt in OPTIONS.items()}
    sources = dict.fromkeys(OPTIONS, "default")

    table, label = _file_layer(Path(directory) if directory is not None else Path.cwd())
    for key, raw in table.items():
        source = f"file {label}"
        values[key] = _option(key, source).convert(raw, source)
        sources[key] = source

    for key, opt in OPTIONS.items():
        raw_env = environ.get(opt.env_var)
        if raw_env is not None:
            source = f"environment {opt.env_var}"
            values[key] = opt.convert(raw_env, source)
            sources[key] = source

    with _override_lock:
        layers = list(_override_stack)
    for layer in layers:
        for key, value in layer.items():
            values[key] = value
            sources[key] = "override()"
    return Config(values, sources)


def get_config() -> Config:
    """The configuration in force now (all layers but explicit arguments)."""
    return load()


def get(key: str, explicit: Any = None) -> Any:
    """The value of ``key``: ``explicit`` if given (not None), else the layered value."""
    return resolve(key, explicit)[0]


def resolve(key: str, explicit: Any = None) -> tuple[Any, str]:
    """``(value, source)`` of ``key``, an explicit call argument winning over all layers."""
    opt = _option(key, "a call")
    if explicit is not None:
        return opt.convert(explicit, "argument"), "argument"
    cfg = load()
    return cfg[key], cfg.source(key)


__all__ = ["OPTIONS", "Config", "Option", "get", "get_config", "load", "override", "register_option", "resolve"]
