"""The plugin manager and the per-kind registries.

The manager is built on first use by :func:`get_plugin_manager` (cached; tests call
:func:`reset_plugin_manager` to rebuild it) and never at import time. Built-in plugins,
the plugin modules of mxkit's own components that are installed, register first; then,
unless ``MXKIT_DISABLE_PLUGIN_AUTOLOAD`` is set, every entry point of group ``mxkit``,
each in its own ``try`` so that a broken plugin becomes a :class:`PluginLoadWarning`
naming it, and the framework keeps working.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from mxkit.core import config
from mxkit.core.errors import DuplicatePluginError, PluginError, UnknownPluginError
from mxkit.core.specs import (
    BackendSpec,
    CompressorSpec,
    ConsistencySpec,
    EngineSpec,
    KVStoreSpec,
    OptimizerSpec,
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
    ("mxkit.kvstore.plugin", "mxkit-kvstore"),
    ("mxkit.train.plugin", "mxkit-train"),
)


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
    import pluggy
    from mxkit.core import hookspecs

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    _plugin_info.clear()
    cfg = config.get_config()
    if cfg.trace_plugins:
        pm.trace.root.setwriter(lambda message: sys.stderr.write(message))
        pm.enable_tracing()

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

    if not cfg.disable_plugin_autoload:
        _load_entry_points(pm)
    return pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    from importlib import metadata

    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if pm.has_plugin(entry_point.name) or pm.is_blocked(entry_point.name):
            continue
        dist = getattr(entry_point, "dist", None)
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
        return registered


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered by hand (or any plugin, by its name)."""
    with _manager_lock:
        get_plugin_manager().unregister(name=name)
        _plugin_info.pop(name, None)
        for registry in _REGISTRIES.values():
            registry.clear()


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
    "kvstore": PluginRegistry("KVStore type", "mxkit_kvstores", KVStoreSpec,
                              "The built-in types come with mxkit-kvstore (pip install mxkit-kvstore; the dist_* "
                              "types need pip install 'mxkit-kvstore[dist]')."),
    "optimizer": PluginRegistry("optimizer", "mxkit_optimizers", OptimizerSpec,
                                "The built-in optimizers come with mxkit-train (pip install mxkit-train)."),
}


def registry(kind: str) -> PluginRegistry[Any]:
    """The registry of one kind: ``backend``, ``engine``, ``planner``, ``consistency``, ``compressor``."""
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


__all__ = [
    "BUILTIN_PLUGIN_MODULES",
    "ENTRY_POINT_GROUP",
    "PluginLoadWarning",
    "PluginRegistry",
    "call_kernel_hooks",
    "check_pending",
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
    "register_plugin",
    "registry",
    "reset_plugin_manager",
    "unregister_plugin",
]
