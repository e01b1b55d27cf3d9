"""mxkit-train's plugin: the configuration keys of the training loop, and its optimizers by
registry name for components below it.

Registered by mxkit-core's plugin manager as a built-in (``BUILTIN_PLUGIN_MODULES``);
imports nothing but core at import time. A KVStore server rebuilds the optimizer a worker
described (``Optimizer.dumps()``) through ``mxkit.core.plugins.get_optimizer`` instead of
importing mxkit-train, which sits above it; that hook imports the optimizers only when the
registry is first looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptimizerSpec, OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``update_on_kvstore`` (mxkit.train.model.kvstore_sync), ``module_step_program``
    (mxkit.train.module.step_program)."""
    yield OptionSpec("update_on_kvstore", "bool", True,
                     "whether the KVStore runs the optimizer (True) or only sums gradients for the devices' "
                     "updaters (False); MXNet's MXNET_UPDATE_ON_KVSTORE is read when this key is not set")
    yield OptionSpec("module_step_program", "bool", True,
                     "whether Module.fit replays a step prepared once per bind (any devices and store, no "
                     "monitor) instead of calling forward, backward, update and update_metric per batch; "
                     "the results are the same to the bit, False only takes the general path")


def _factory(name: str) -> Callable[..., Any]:
    def create(**params: Any) -> Any:
        from mxkit.train.optimizer import create as create_optimizer

        return create_optimizer(name, **params)

    return create


@hookimpl(tryfirst=True)
def mxkit_optimizers() -> Iterator[OptimizerSpec]:
    """Yield every optimizer registered with ``mx.optimizer`` (``sgd``, ``adam``...)."""
    from mxkit.train.optimizer import Optimizer  # (the package registers every built-in optimizer)

    for name in sorted(Optimizer.opt_registry):
        yield OptimizerSpec(name=name, factory=_factory(name), description=f"mx.optimizer.create({name!r})")
