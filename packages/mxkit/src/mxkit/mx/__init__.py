"""The mxkit facade: ``from mxkit import mx`` gives MXNet 1.x's short names.

Every name is imported on first use, so ``from mxkit import mx`` is cheap and works with
any subset of the components installed; touching a name whose component is missing
raises :class:`~mxkit.core.errors.MissingComponentError` saying what to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from mxkit.core.errors import MissingComponentError

# short name -> (module, attribute or None for the module itself, distribution, install line)
_CORE = "mxkit-core"
_ND = ("mxkit-ndarray", "pip install mxkit-ndarray mxkit-cpu")
_SYM = ("mxkit-symbol", "pip install mxkit-symbol")
_KV = ("mxkit-kvstore", "pip install mxkit-kvstore")
_IO = ("mxkit-io", "pip install mxkit-io")
_TRAIN = ("mxkit-train", "pip install mxkit-train")
_GLUON = ("mxkit-gluon", "pip install mxkit-gluon")

LAZY_NAMES: dict[str, tuple[str, str | None, str, str]] = {
    "Context": ("mxkit.core.context", "Context", _CORE, ""),
    "cpu": ("mxkit.core.context", "cpu", _CORE, ""),
    "gpu": ("mxkit.core.context", "gpu", _CORE, ""),
    "cpu_pinned": ("mxkit.core.context", "cpu_pinned", _CORE, ""),
    "current_context": ("mxkit.core.context", "current_context", _CORE, ""),
    "context": ("mxkit.core.context", None, _CORE, ""),
    "config": ("mxkit.core.config", None, _CORE, ""),
    "base": ("mxkit.mx.base", None, "mxkit", ""),
    "__version__": ("mxkit.mx.base", "__version__", "mxkit", ""),
    "runtime": ("mxkit.mx.runtime", None, "mxkit", ""),
    "test_utils": ("mxkit.mx.test_utils", None, "mxkit", ""),
    "contrib": ("mxkit.mx.contrib", None, "mxkit", ""),
    "MXNetError": ("mxkit.core.errors", "MXKitError", _CORE, ""),
    "MXKitError": ("mxkit.core.errors", "MXKitError", _CORE, ""),
    "engine": ("mxkit.engine", None, "mxkit-engine", "pip install mxkit-engine"),
    "profiler": ("mxkit.engine.profiler", None, "mxkit-engine", "pip install mxkit-engine"),
    "memplan": ("mxkit.memplan", None, "mxkit-memplan", "pip install mxkit-memplan"),
    "nd": ("mxkit.ndarray", None, *_ND),
    "ndarray": ("mxkit.ndarray", None, *_ND),
    "random": ("mxkit.ndarray.random", None, *_ND),
    "autograd": ("mxkit.mx.autograd", None, *_SYM),
    "operator": ("mxkit.ndarray.operator", None, *_ND),
    "sym": ("mxkit.symbol", None, *_SYM),
    "symbol": ("mxkit.symbol", None, *_SYM),
    "name": ("mxkit.symbol.name", None, *_SYM),
    "attribute": ("mxkit.symbol.attribute", None, *_SYM),
    "AttrScope": ("mxkit.symbol.attribute", "AttrScope", *_SYM),
    "viz": ("mxkit.symbol.visualization", None, *_SYM),
    "kv": ("mxkit.kvstore", None, *_KV),
    "kvstore": ("mxkit.kvstore", None, *_KV),
    "io": ("mxkit.io", None, *_IO),
    "recordio": ("mxkit.io.recordio", None, *_IO),
    "image": ("mxkit.mx.image", None, "mxkit", ""),
    "img": ("mxkit.mx.image", None, "mxkit", ""),
    "optimizer": ("mxkit.train.optimizer", None, *_TRAIN),
    "lr_scheduler": ("mxkit.train.lr_scheduler", None, *_TRAIN),
    "init": ("mxkit.train.initializer", None, *_TRAIN),
    "initializer": ("mxkit.train.initializer", None, *_TRAIN),
    "metric": ("mxkit.train.metric", None, *_TRAIN),
    "callback": ("mxkit.train.callback", None, *_TRAIN),
    "model": ("mxkit.train.model", None, *_TRAIN),
    "mod": ("mxkit.train.module", None, *_TRAIN),
    "module": ("mxkit.train.module", None, *_TRAIN),
    "rnn": ("mxkit.train.rnn", None, *_TRAIN),
    "gluon": ("mxkit.gluon", None, *_GLUON),
    "mon": ("mxkit.train.monitor", None, *_TRAIN),
    "monitor": ("mxkit.train.monitor", None, *_TRAIN),
    "util": ("mxkit.mx.util", None, "mxkit", ""),
    "np_shape": ("mxkit.mx.util", "np_shape", "mxkit", ""),
    "is_np_shape": ("mxkit.mx.util", "is_np_shape", "mxkit", ""),
    "set_np_shape": ("mxkit.mx.util", "set_np_shape", "mxkit", ""),
    "use_np_shape": ("mxkit.mx.util", "use_np_shape", "mxkit", ""),
    "cpu_shared": ("mxkit.core.context", "cpu_shared", _CORE, ""),
    "np": ("mxkit.mx.numpy", None, *_ND),
    "numpy": ("mxkit.mx.numpy", None, *_ND),
    "npx": ("mxkit.mx.numpy_extension", None, *_ND),
    "numpy_extension": ("mxkit.mx.numpy_extension", None, *_ND),
}


def _installed_version(distribution: str) -> str | None:
    from importlib import metadata  # only on the error path: it costs milliseconds

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _resolve(name: str) -> Any:
    module_name, attribute, distribution, install = LAZY_NAMES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (module_name == missing or module_name.startswith(missing + ".")):
            raise  # a bug inside the component, not a missing component
        version = _installed_version(distribution)
        if version is None:
            raise MissingComponentError(
                f"mx.{name} needs the {distribution} component, which is not installed; "
                f"install it with: {install}"
            ) from None
        raise MissingComponentError(
            f"mx.{name} needs module {module_name}, which {distribution} {version} does not "
            f"provide yet; upgrade it with: {install} --upgrade"
        ) from None
    return module if attribute is None else getattr(module, attribute)


def __getattr__(name: str) -> Any:
    if name not in LAZY_NAMES:
        raise AttributeError(
            f"module 'mxkit.mx' has no attribute {name!r}; the names are: {', '.join(sorted(LAZY_NAMES))}"
        )
    value = _resolve(name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(LAZY_NAMES))


__all__ = sorted(LAZY_NAMES)
