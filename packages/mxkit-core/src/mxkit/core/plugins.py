"""The plugin manager and the per-kind registries.

The manager is built on first use by :func:`get_plugin_manager` (cached; tests call
:func:`reset_plugin_manager` to rebuild it) and never at import time. Built-in plugins,
mxkit-core's own and the plugin modules of mxkit's components that are installed,
register first; then every entry point of group ``mxkit``, each in its own ``try`` so
that a broken plugin becomes a :class:`PluginLoadWarning` naming it, and the framework
keeps working. With ``disable_plugin_autoload`` set, only the entry points of mxkit's
own distributions (:data:`FIRST_PARTY_DISTRIBUTIONS`: the CPU and CUDA backends) and
those the config key ``plugins`` names are loaded (pytest's ``-p name``).

Configuration keys are declared through the ``mxkit_options`` hook and collected once
the plugins are (:func:`collect_options`); until then only mxkit-core's keys are known.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from mxkit.core import config
from mxkit.core.errors import ConfigError, DuplicatePluginError, PluginError, UnknownPluginError
from mxkit.core.specs import (
    BackendSpec,
    CompressorSpec,
    ConsistencySpec,
    EngineSpec,
    KVStoreSpec,
    OptimizerSpec,
    OptionSpec,
    PlannerSpec,
    PluginInfo,
    normalize_name,
)

if TYPE_CHECKING:
    import pluggy

ENTRY_POINT_GROUP = "mxkit"

#: mxkit's own components that carry plugins, as (module, distribution). A component
#: that is not installed is skipped silently: installing only what you need is the point.
BUILTIN_PLUGIN_MODULES: tuple[tuple[str, str], ...] = (
    ("mxkit.engine.plugin", "mxkit-engine"),
    ("mxkit.memplan.plugin", "mxkit-memplan"),
    # ndarray, io and symbol import numpy on import: their plugins sit beside them, cheap
    ("mxkit.ndarray_plugin", "mxkit-ndarray"),
    ("mxkit.io_plugin", "mxkit-io"),
    ("mxkit.symbol_plugin", "mxkit-symbol"),
    ("mxkit.kvstore.plugin", "mxkit-kvstore"),
    ("mxkit.train.plugin", "mxkit-train"),
)

#: mxkit-core's own plugin (its configuration keys); always registered first.
CORE_PLUGIN_MODULE = "mxkit.core.plugin"

#: Distributions of mxkit itself: their entry points (the first-party backends, which are
#: registered through entry points exactly as an outside plugin would be) load even when
#: ``disable_plugin_autoload`` is set.
FIRST_PARTY_DISTRIBUTIONS: frozenset[str] = frozenset({
    "mxkit", "mxkit-core", "mxkit-engine", "mxkit-ndarray", "mxkit-memplan", "mxkit-symbol",
    "mxkit-kvstore", "mxkit-io", "mxkit-train", "mxkit-cpu", "mxkit-cuda",
})


class PluginLoadWarning(UserWarning):
    """A plugin could not be imported, registered or called; it was skipped."""


_manager_lock = threading.RLock()
_plugin_info: dict[str, PluginInfo] = {}


def _distribution_version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _make_manager() -> pluggy.PluginManager:
    # Until the manager is built only mxkit-core's keys are known (the manager reads some of
    # them); a plugin that reads configuration while it is imported sees those alone, and the
    # other components' keys are checked once collect_options() has run.
    with config.bootstrapping():
        return _make_manager_bootstrapping()


def _make_manager_bootstrapping() -> pluggy.PluginManager:
    import pluggy
    from mxkit.core import hookspecs

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    _plugin_info.clear()
    config.forget_options()
    cfg = config.get_config()
    if cfg.trace_plugins:
        pm.trace.root.setwriter(lambda message: sys.stderr.write(message))
        pm.enable_tracing()

    core_plugin = importlib.import_module(CORE_PLUGIN_MODULE)
    pm.register(core_plugin, name=CORE_PLUGIN_MODULE)
    _plugin_info[CORE_PLUGIN_MODULE] = PluginInfo(CORE_PLUGIN_MODULE, "mxkit-core",
                                                  _distribution_version("mxkit-core"))
    for module_name, distribution in BUILTIN_PLUGIN_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue  # the component is not installed
            raise
        pm.register(module, name=module_name)
        _plugin_info[module_name] = PluginInfo(module_name, distribution, _distribution_version(distribution))
    _check_pending_or_raise(pm)

    _load_entry_points(pm, autoload=not cfg.disable_plugin_autoload, wanted=cfg.plugins,
                       wanted_source=cfg.source("plugins"))
    return pm


def _canonical_distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _load_entry_points(pm: pluggy.PluginManager, autoload: bool = True, wanted: tuple[str, ...] = (),
                       wanted_source: str = "default") -> None:
    from importlib import metadata

    entry_points = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    missing = sorted(set(wanted) - {normalize_name(ep.name) for ep in entry_points})
    if missing:
        available = ", ".join(sorted(ep.name for ep in entry_points)) or "none"
        raise ConfigError(
            f"config key 'plugins' (from {wanted_source}) names {', '.join(map(repr, missing))}, but no "
            f"installed package has an mxkit entry point of that name; installed: {available}"
        )
    for entry_point in entry_points:
        if pm.has_plugin(entry_point.name) or pm.is_blocked(entry_point.name):
            continue
        dist = getattr(entry_point, "dist", None)
        first_party = dist is not None and _canonical_distribution(dist.name) in FIRST_PARTY_DISTRIBUTIONS
        if not (autoload or first_party or normalize_name(entry_point.name) in wanted):
            continue
        info = PluginInfo(entry_point.name, dist.name if dist else None, dist.version if dist else None)
        try:
            plugin = entry_point.load()
            pm.register(plugin, name=entry_point.name)
        except Exception as exc:  # a broken plugin must not break the framework
            warnings.warn(
                f"mxkit plugin {info.describe()} (entry point {entry_point.value!r}) failed to load "
                f"and was skipped: {type(exc).__name__}: {exc}",
                PluginLoadWarning,
                stacklevel=2,
            )
            continue
        _plugin_info[entry_point.name] = info
        try:
            _check_pending_or_raise(pm)
        except PluginError as exc:
            pm.unregister(name=entry_point.name)
            del _plugin_info[entry_point.name]
            warnings.warn(f"{exc}; the plugin was skipped", PluginLoadWarning, stacklevel=2)


def _check_pending_or_raise(pm: pluggy.PluginManager) -> None:
    import pluggy

    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        from mxkit.core.hookspecs import HOOK_NAMES

        raise PluginError(
            f"mxkit plugin {exc.plugin!r} implements a hook that does not exist: {exc}. "
            f"The hooks are: {', '.join(HOOK_NAMES)}"
        ) from None


@functools.lru_cache(maxsize=1)
def _cached_manager() -> pluggy.PluginManager:
    return _make_manager()


def get_plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, built on first call."""
    with _manager_lock:
        return _cached_manager()


def reset_plugin_manager() -> None:
    """Forget the manager and every registry, so the next use rebuilds them (tests)."""
    with _manager_lock:
        _cached_manager.cache_clear()
        for registry in _REGISTRIES.values():
            registry.clear()
        config.forget_options()


def check_pending() -> None:
    """Raise :class:`PluginError` if a registered plugin implements an unknown hook."""
    _check_pending_or_raise(get_plugin_manager())


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register a plugin object or module by hand (tests, notebooks, embedding apps)."""
    with _manager_lock:
        pm = get_plugin_manager()
        registered = pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin {name or plugin!r} is already registered or blocked")
        try:
            _check_pending_or_raise(pm)
        except PluginError:
            pm.unregister(plugin)
            raise
        _plugin_info[registered] = PluginInfo(registered)
        for registry in _REGISTRIES.values():
            registry.clear()
        config.forget_options()
        return registered


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered by hand (or any plugin, by its name)."""
    with _manager_lock:
        get_plugin_manager().unregister(name=name)
        _plugin_info.pop(name, None)
        for registry in _REGISTRIES.values():
            registry.clear()
        config.forget_options()


def plugin_info(plugin_name: str) -> PluginInfo:
    """Distribution and version of a registered plugin."""
    return _plugin_info.get(plugin_name, PluginInfo(plugin_name))


def list_plugins() -> list[PluginInfo]:
    """Every registered plugin, in registration order."""
    pm = get_plugin_manager()
    return [plugin_info(name) for name, _ in pm.list_name_plugin()]


S = TypeVar("S")


@dataclass
class _Entry(Generic[S]):
    spec: S
    origin: PluginInfo


class PluginRegistry(Generic[S]):
    """The specs of one kind, collected from every plugin's hook, keyed by name.

    Two plugins yielding one name make that name ambiguous: looking it up raises
    :class:`DuplicatePluginError` naming both; every other name still works.
    """

    def __init__(self, kind: str, hook_name: str, spec_type: type, install_hint: str,
                 keys: Callable[[Any], Iterable[str]] = lambda spec: spec.names):
        self.kind = kind
        self.hook_name = hook_name
        self.spec_type = spec_type
        self.install_hint = install_hint
        self._keys = keys
        self._entries: dict[str, _Entry[S]] | None = None
        self._conflicts: dict[str, list[PluginInfo]] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget the collected specs (rebuilt on next use)."""
        with self._lock:
            self._entries = None
            self._conflicts = {}

    def _collect(self) -> dict[str, _Entry[S]]:
        with self._lock:
            if self._entries is not None:
                return self._entries
            pm = get_plugin_manager()
            entries: dict[str, _Entry[S]] = {}
            conflicts: dict[str, list[PluginInfo]] = {}
            hook = getattr(pm.hook, self.hook_name)
            # get_hookimpls() is in registration order (pluggy calls them in reverse).
            for impl in hook.get_hookimpls():
                origin = plugin_info(impl.plugin_name)
                try:
                    specs = list(impl.function() or ())
                except Exception as exc:  # one plugin's bug must not hide the others
                    warnings.warn(
                        f"mxkit plugin {origin.describe()} raised in {self.hook_name}() and was "
                        f"skipped: {type(exc).__name__}: {exc}",
                        PluginLoadWarning,
                        stacklevel=3,
                    )
                    continue
                for spec in specs:
                    if not isinstance(spec, self.spec_type):
                        warnings.warn(
                            f"mxkit plugin {origin.describe()} yielded {spec!r} from {self.hook_name}(), "
                            f"expected a {self.spec_type.__name__}; it was skipped",
                            PluginLoadWarning,
                            stacklevel=3,
                        )
                        continue
                    for key in self._keys(spec):
                        if key in conflicts:
                            conflicts[key].append(origin)
                        elif key in entries:
                            conflicts[key] = [entries.pop(key).origin, origin]
                        else:
                            entries[key] = _Entry(cast(S, spec), origin)
            self._entries, self._conflicts = entries, conflicts
            return entries

    def names(self) -> list[str]:
        """Sorted names that resolve to exactly one spec."""
        return sorted(self._collect())

    def items(self) -> list[tuple[str, S, PluginInfo]]:
        """``(name, spec, origin)`` for every unambiguous name, sorted by name."""
        entries = self._collect()
        return [(name, entries[name].spec, entries[name].origin) for name in sorted(entries)]

    def conflicts(self) -> dict[str, list[PluginInfo]]:
        """Names provided by more than one plugin, with the plugins."""
        self._collect()
        return dict(self._conflicts)

    def get(self, name: str, source: str | None = None) -> S:
        """The spec registered under ``name``.

        Raises
        ------
        UnknownPluginError
            No plugin provides ``name``; the message lists the available names.
        DuplicatePluginError
            Two plugins provide ``name``; the message names both distributions.
        """
        key = normalize_name(name)
        entries = self._collect()
        if key in entries:
            return entries[key].spec
        where = f" (from {source})" if source else ""
        if key in self._conflicts:
            who = " and ".join(origin.describe() for origin in self._conflicts[key])
            raise DuplicatePluginError(
                f"{self.kind} {key!r}{where} is registered by more than one plugin: {who}; "
                f"uninstall one of them"
            )
        available = ", ".join(sorted(entries)) or "none"
        raise UnknownPluginError(
            f"unknown {self.kind} {name!r}{where}; available: {available}. {self.install_hint}"
        )


_REGISTRIES: dict[str, PluginRegistry[Any]] = {
    "backend": PluginRegistry(
        "backend (device type)", "mxkit_backends", BackendSpec,
        "For CPU arrays install mxkit-cpu; for NVIDIA GPUs install 'mxkit-cuda[cuda12]'.",
        keys=lambda spec: spec.device_types,
    ),
    "engine": PluginRegistry("engine", "mxkit_engines", EngineSpec,
                             "The built-in engines come with mxkit-engine (pip install mxkit-engine)."),
    "planner": PluginRegistry("memory planner", "mxkit_memory_planners", PlannerSpec,
                              "The built-in planners come with mxkit-memplan (pip install mxkit-memplan)."),
    "consistency": PluginRegistry("consistency model", "mxkit_consistency_models", ConsistencySpec,
                                  "The built-in models come with mxkit-kvstore (pip install mxkit-kvstore)."),
    "compressor": PluginRegistry("gradient compressor", "mxkit_gradient_compressors", CompressorSpec,
                                 "The built-in compressors come with mxkit-kvstore (pip install mxkit-kvstore)."),
    "option": PluginRegistry("config key", "mxkit_options", OptionSpec,
                             "A key is declared by the component that reads it; install that component."),
    "kvstore": PluginRegistry("KVStore type", "mxkit_kvstores", KVStoreSpec,
                              "The built-in types come with mxkit-kvstore (pip install mxkit-kvstore; the dist_* "
                              "types need pip install 'mxkit-kvstore[dist]')."),
    "optimizer": PluginRegistry("optimizer", "mxkit_optimizers", OptimizerSpec,
                                "The built-in optimizers come with mxkit-train (pip install mxkit-train)."),
}


def collect_options() -> tuple[dict[str, OptionSpec], dict[str, str]]:
    """Every configuration key declared through ``mxkit_options``, and who declared each.

    Raises
    ------
    DuplicatePluginError
        Two plugins declare one key (the message names both).
    """
    option_registry = registry("option")
    conflicts = option_registry.conflicts()
    if conflicts:
        key, origins = next(iter(sorted(conflicts.items())))
        raise DuplicatePluginError(
            f"config key {key!r} is declared by more than one plugin: "
            f"{' and '.join(origin.describe() for origin in origins)}"
        )
    specs: dict[str, OptionSpec] = {}
    owners: dict[str, str] = {}
    for name, spec, origin in option_registry.items():
        specs[name] = spec
        owners[name] = origin.distribution or origin.plugin
    return specs, owners


def registry(kind: str) -> PluginRegistry[Any]:
    """The registry of one kind: ``backend``, ``engine``, ``planner``, ``consistency``, ``compressor``,
    ``option``."""
    try:
        return _REGISTRIES[kind]
    except KeyError:
        raise UnknownPluginError(f"unknown plugin kind {kind!r}; kinds: {', '.join(_REGISTRIES)}") from None


def _get_configured(kind: str, key: str, name: str | None) -> Any:
    value, source = config.resolve(key, name)
    return registry(kind).get(value, source=f"config {key!r} from {source}")


def get_backend(device_type: str) -> BackendSpec:
    """The backend serving ``device_type`` (``"cpu"``, ``"gpu"``, an alias...)."""
    spec: BackendSpec = registry("backend").get(device_type)
    return spec


def get_engine_spec(name: str | None = None) -> EngineSpec:
    """The engine spec named ``name``, or the one config ``engine`` selects."""
    spec: EngineSpec = _get_configured("engine", "engine", name)
    return spec


def get_planner(name: str | None = None) -> PlannerSpec:
    """The memory planner named ``name``, or the one config ``memplan`` selects."""
    spec: PlannerSpec = _get_configured("planner", "memplan", name)
    return spec


def get_consistency_model(name: str | None = None) -> ConsistencySpec:
    """The consistency model named ``name``, or the one config ``consistency`` selects."""
    spec: ConsistencySpec = _get_configured("consistency", "consistency", name)
    return spec


def get_compressor(name: str) -> CompressorSpec:
    """The gradient compressor named ``name``."""
    spec: CompressorSpec = registry("compressor").get(name)
    return spec


def get_kvstore(name: str) -> KVStoreSpec:
    """The KVStore type named ``name`` (or one of its aliases)."""
    spec: KVStoreSpec = registry("kvstore").get(name)
    return spec


def get_optimizer(name: str) -> OptimizerSpec:
    """The optimizer registered under ``name``."""
    spec: OptimizerSpec = registry("optimizer").get(name)
    return spec


def call_kernel_hooks(kernel_registry: Any) -> None:
    """Let every plugin register its kernels into ``kernel_registry`` (mxkit-ndarray)."""
    get_plugin_manager().hook.mxkit_kernels(registry=kernel_registry)


def preferred_cpu_workers() -> int | None:
    """The fewest engine worker threads per CPU device that a plugin asks for through
    :func:`~mxkit.core.hookspecs.mxkit_cpu_workers`, or None when none has a preference."""
    answers = [value for value in get_plugin_manager().hook.mxkit_cpu_workers() if value is not None]
    for value in answers:
        if type(value) is not int or value < 1:
            raise PluginError(f"a plugin's mxkit_cpu_workers hook answered {value!r}; it must be an int >= 1 or None")
    return min(answers, default=None)


__all__ = [
    "BUILTIN_PLUGIN_MODULES",
    "CORE_PLUGIN_MODULE",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_DISTRIBUTIONS",
    "PluginLoadWarning",
    "PluginRegistry",
    "call_kernel_hooks",
    "check_pending",
    "collect_options",
    "get_backend",
    "get_compressor",
    "get_consistency_model",
    "get_engine_spec",
    "get_kvstore",
    "get_optimizer",
    "get_planner",
    "get_plugin_manager",
    "list_plugins",
    "plugin_info",
    "preferred_cpu_workers",
    "register_plugin",
    "registry",
    "reset_plugin_manager",
    "unregister_plugin",
]
