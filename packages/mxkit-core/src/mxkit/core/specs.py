"""Spec dataclasses: what a plugin yields from a hook.

Every spec has a ``name``, normalised on construction (stripped, lower-cased) so that
``"Threaded"`` and ``" threaded "`` are one name. The rest of a spec is a callable or an
object that mxkit calls later; building a spec must stay cheap, so heavy modules are
imported inside the factories, not at hook time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mxkit.core.errors import ConfigError, PluginError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
OPTION_TYPES = ("str", "int", "float", "bool", "list")


def normalize_name(name: object) -> str:
    """Return the canonical form of a plugin name: stripped and lower-case.

    Raises
    ------
    PluginError
        If ``name`` is not a non-empty string.
    """
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"a plugin name must be a non-empty string, got {name!r}")
    return name.strip().lower()


@dataclass(frozen=True)
class _NamedSpec:
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", normalize_name(self.name))

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this spec answers to (its name, then any aliases)."""
        return (self.name,)


@dataclass(frozen=True)
class BackendSpec(_NamedSpec):
    """A hardware backend: how arrays of one device type are allocated and computed.

    Parameters
    ----------
    name : str
        The backend's name, e.g. ``"numpy"`` or ``"cupy"``.
    device_type : str
        The device type of :class:`mxkit.core.Context` it serves (``"cpu"``, ``"gpu"``).
    factory : callable
        ``factory(device_id) -> backend object``, called once per device on first use. The
        object is an instance of a subclass of ``mxkit.ndarray.backend.Backend`` (the
        published interface, defined by mxkit-ndarray; see docs/plugins.md).
    aliases : tuple of str
        Other device-type names that resolve to this backend (``("cuda",)`` for gpu).
    description : str
        One line shown beside the name in ``mxkit info``.
    count_devices : callable, optional
        ``count_devices() -> int``: how many devices of this type the machine has (0 when
        the driver or library is missing); ``mx.context.num_gpus()`` asks the gpu backend.
    memory_info : callable, optional
        ``memory_info(device_id) -> (free_bytes, total_bytes)`` of one device
        (``mx.context.gpu_memory_info``).
    """

    device_type: str = ""
    factory: Callable[[int], Any] | None = None
    aliases: tuple[str, ...] = ()
    description: str = ""
    count_devices: Callable[[], int] | None = None
    memory_info: Callable[[int], tuple[int, int]] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "device_type", normalize_name(self.device_type))
        object.__setattr__(self, "aliases", tuple(normalize_name(a) for a in self.aliases))
        if not callable(self.factory):
            raise PluginError(f"backend {self.name!r} needs a callable factory, got {self.factory!r}")

    @property
    def device_types(self) -> tuple[str, ...]:
        """The device type and its aliases."""
        return (self.device_type, *self.aliases)


@dataclass(frozen=True)
class EngineSpec(_NamedSpec):
    """An execution engine: ``factory(**options) -> engine``."""

    factory: Callable[..., Any] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.factory):
            raise PluginError(f"engine {self.name!r} needs a callable factory, got {self.factory!r}")


@dataclass(frozen=True)
class PlannerSpec(_NamedSpec):
    """A memory-planning strategy: ``planner(graph, **options) -> MemoryPlan``.

    Parameters
    ----------
    planner : callable
        ``planner(graph, **options) -> MemoryPlan`` over mxkit-memplan's graph description.
    description : str
        One line for ``mxkit info``.
    select_checkpoints : callable, optional
        Set for a *recomputing* planner (``sublinear``): the client rewrites its graph
        first so that backward recomputes the forward results this selection does not
        keep, ``select_checkpoints(candidates, policy, segment_bytes) -> frozenset of
        names`` (see :func:`mxkit.memplan.select_checkpoints`), then passes the planner
        ``recompute=`` the names of the recomputing nodes. None for an ordinary planner.
    """

    planner: Callable[..., Any] | None = None
    description: str = ""
    select_checkpoints: Callable[..., frozenset[str]] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.planner):
            raise PluginError(f"planner {self.name!r} needs a callable, got {self.planner!r}")


@dataclass(frozen=True)
class ConsistencySpec(_NamedSpec):
    """A KVStore consistency model (``sequential``, ``eventual``, ``bounded_delay``...).

    ``model`` is a class or factory the KVStore instantiates per store.
    """

    model: Any = None
    description: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model is None:
            raise PluginError(f"consistency model {self.name!r} needs a model, got None")


@dataclass(frozen=True)
class CompressorSpec(_NamedSpec):
    """A gradient compressor: ``factory(**params) -> compressor``."""

    factory: Callable[..., Any] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.factory):
            raise PluginError(f"compressor {self.name!r} needs a callable factory, got {self.factory!r}")


@dataclass(frozen=True)
class KVStoreSpec(_NamedSpec):
    """A KVStore type, as ``mx.kv.create(name)`` makes it.

    Parameters
    ----------
    name : str
        The type's name (``"local"``, ``"dist_sync"``...).
    factory : callable
        ``factory(name, **options) -> store``: called with the name asked for (so that one
        factory can serve several aliases) and the options given to ``mx.kv.create``; the
        store should subclass ``mxkit.kvstore.KVStoreBase``.
    aliases : tuple of str
        Other names of the same type (MXNet's ``local_update_cpu``, ``dist_sync_device``...).
    description : str
        One line for ``mxkit info`` and error messages.
    """

    factory: Callable[..., Any] | None = None
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.factory):
            raise PluginError(f"KVStore type {self.name!r} needs a callable factory, got {self.factory!r}")
        object.__setattr__(self, "aliases", tuple(normalize_name(alias) for alias in self.aliases))

    @property
    def names(self) -> tuple[str, ...]:
        """The name, then the aliases."""
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class OptimizerSpec(_NamedSpec):
    """An optimizer that components below mxkit-train can build by name (a KVStore server
    rebuilding the optimizer a worker described as JSON).

    Parameters
    ----------
    name : str
        The optimizer's registry name (``"sgd"``, ``"adam"``...).
    factory : callable
        ``factory(**params) -> optimizer`` with MXNet's optimizer protocol
        (``create_state(index, weight)``, ``update(index, weight, grad, state)``).
    """

    factory: Callable[..., Any] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.factory):
            raise PluginError(f"optimizer {self.name!r} needs a callable factory, got {self.factory!r}")


@dataclass(frozen=True)
class OptionSpec(_NamedSpec):
    """A configuration key a component declares (hook ``mxkit_options``).

    The key is read from ``mxkit.toml`` / ``[tool.mxkit]``, from ``MXKIT_<NAME>`` and
    from ``config.override(name=...)``; core records which plugin declared it (shown by
    ``mxkit info``).

    Parameters
    ----------
    name : str
        The key, lower-case (``"exec_bulk_size"``); its variable is ``MXKIT_EXEC_BULK_SIZE``.
    type : {"str", "int", "float", "bool", "list"}
        What values convert to (``list``: a tuple of lower-case strings; a comma-separated
        string in the environment).
    default : object
        The value when no layer sets the key.
    help : str
        One line for ``mxkit info`` and error messages.
    choices : tuple of str, optional
        The only allowed values (strings are lower-cased before the check).
    minimum : float, optional
        The smallest allowed value of an ``int`` or ``float`` key.
    plugin_kind : str, optional
        The plugin registry whose names the value selects (``"engine"``): the value is
        normalised like a plugin name and checked against the registry when it is used.
    """

    type: str = "str"
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    plugin_kind: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.type not in OPTION_TYPES:
            raise PluginError(f"option {self.name!r} has type {self.type!r}; types: {', '.join(OPTION_TYPES)}")
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))

    @property
    def env_var(self) -> str:
        """The environment variable of this key (``MXKIT_`` + upper-case name)."""
        return "MXKIT_" + self.name.upper()

    def convert(self, value: Any, source: str) -> Any:
        """Return ``value`` converted to this option's type.

        Raises
        ------
        ConfigError
            Naming the key, the value, ``source`` and what would be right.
        """
        try:
            converted = self._convert(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"config key {self.name!r} = {value!r} (from {source}) is not a valid {self.type}"
                + self._hint()
            ) from None
        if self.choices is not None:
            bad = [v for v in (converted if self.type == "list" else [converted]) if v not in self.choices]
            if bad:
                raise ConfigError(
                    f"config key {self.name!r} = {value!r} (from {source}) is not allowed" + self._hint()
                )
        if self.minimum is not None and converted < self.minimum:
            raise ConfigError(
                f"config key {self.name!r} = {value!r} (from {source}) must be >= {self.minimum}"
            )
        return converted

    def _hint(self) -> str:
        if self.choices is not None:
            return f"; choices: {', '.join(self.choices)}"
        return f"; expected a {self.type}, e.g. {self.default!r}"

    def _convert(self, value: Any) -> Any:
        if self.type == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise ValueError(value)
        if self.type == "int":
            if isinstance(value, bool) or isinstance(value, float):
                raise TypeError(value)
            return int(value)
        if self.type == "float":
            if isinstance(value, bool):
                raise TypeError(value)
            return float(value)
        if self.type == "list":
            if isinstance(value, str):
                return tuple(p.strip().lower() for p in value.split(",") if p.strip())
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return tuple(v.strip().lower() for v in value)
            raise TypeError(value)
        if not isinstance(value, str):
            raise TypeError(value)
        value = value.strip()
        return value.lower() if self.plugin_kind or self.choices else value


@dataclass(frozen=True)
class PluginInfo:
    """Where a registered spec came from (for errors and ``mxkit info``)."""

    plugin: str
    distribution: str | None = None
    version: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """``"plugin (distribution version)"`` or just the plugin name."""
        if self.distribution:
            return f"{self.plugin} ({self.distribution} {self.version or '?'})"
        return self.plugin


__all__ = [
    "BackendSpec",
    "CompressorSpec",
    "ConsistencySpec",
    "EngineSpec",
    "KVStoreSpec",
    "OptimizerSpec",
    "OptionSpec",
    "PlannerSpec",
    "PluginInfo",
    "normalize_name",
]
