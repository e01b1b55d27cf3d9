"""mxkit-train's plugin: its optimizers, by registry name, for components below it.

Listed in ``mxkit.core.plugins.BUILTIN_PLUGIN_MODULES``. A KVStore server rebuilds the
optimizer a worker described (``Optimizer.dumps()``) through ``mxkit.core.plugins.get_optimizer``
instead of importing mxkit-train, which sits above it. The hook runs only when that
registry is first looked up; it imports the optimizers then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptimizerSpec


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
