'''The hooks through which mxkit's components and outside plugins connect.

A plugin is a module (or object) with functions marked ``@mxkit.core.hookimpl`` whose
names are the hooks below. An outside package exposes it through an entry point of
group ``mxkit`` in its ``pyproject.toml``::

    [project.entry-points.mxkit]
    my_plugin = "my_package.mxkit_plugin"

Every hook except :func:`mxkit_kernels` and :func:`mxkit_cpu_workers` returns an iterable of spec dataclasses
(:mod:`mxkit.core.specs`); mxkit collects them into one registry per kind, keyed by the
spec's normalised name. Hook bodies must be cheap: import heavy modules inside the
factories they return, not at module import or hook time.
'''

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pluggy
from mxkit.core.specs import (
    BackendSpec,
    CompressorSpec,
    ConsistencySpec,
    EngineSpec,
    KVStoreSpec,
    OptimizerSpec,
    OptionSpec,
    PlannerSpec,
)

PROJECT_NAME = "mxkit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def mxkit_backends() -> Iterable[BackendSpec]:  # type: ignore[empty-body]
    """Yield the hardware backends this plugin provides.

    A backend serves one device type of :class:`mxkit.core.Context`; ``mx.cpu()``,
    ``mx.gpu(1)`` or ``mx.Context("opencl", 0)`` find it by that type (or an alias).

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import BackendSpec

        def _make_opencl_backend(device_id):
            # heavy import, deferred; OpenCLBackend subclasses mxkit.ndarray.backend.Backend
            from my_opencl.backend import OpenCLBackend
            return OpenCLBackend(device_id)

        @hookimpl
        def mxkit_backends():
            yield BackendSpec(name="opencl", device_type="opencl",
                              factory=_make_opencl_backend, aliases=("cl",))
    """


@hookspec
def mxkit_engines() -> Iterable[EngineSpec]:  # type: ignore[empty-body]
    """Yield the execution engines this plugin provides (config key ``engine``).

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import EngineSpec

        def _make_serial_engine(**options):
            from my_package.serial import SerialEngine
            return SerialEngine(**options)

        @hookimpl
        def mxkit_engines():
            yield EngineSpec(name="serial", factory=_make_serial_engine)

    Then ``MXKIT_ENGINE=serial`` or ``mxkit.engine.create("serial")`` uses it.
    """


@hookspec
def mxkit_memory_planners() -> Iterable[PlannerSpec]:  # type: ignore[empty-body]
    """Yield memory-planning strategies (config key ``memplan``, or ``bind(memplan=)``).

    A planner is ``planner(graph, **options) -> MemoryPlan`` over mxkit-memplan's
    plain-Python graph description.

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import PlannerSpec

        def plan_everything_apart(graph, **options):
            from mxkit.memplan import plan_memory
            return plan_memory(graph, "none")

        @hookimpl
        def mxkit_memory_planners():
            yield PlannerSpec(name="apart", planner=plan_everything_apart)
    """


@hookspec
def mxkit_consistency_models() -> Iterable[ConsistencySpec]:  # type: ignore[empty-body]
    """Yield KVStore consistency models (``dist_sync``, ``dist_async``, ``dist_ssp``...).

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import ConsistencySpec

        class EveryThirdPush:
            # applies pushes in batches of three
            def __init__(self, num_workers, **options):
                self.num_workers = num_workers

        @hookimpl
        def mxkit_consistency_models():
            yield ConsistencySpec(name="every_third", model=EveryThirdPush)
    """


@hookspec
def mxkit_gradient_compressors() -> Iterable[CompressorSpec]:  # type: ignore[empty-body]
    """Yield gradient compressors for ``kv.set_gradient_compression({"type": name})``.

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import CompressorSpec

        def _make_topk(ratio=0.01):
            from my_package.topk import TopKCompressor
            return TopKCompressor(ratio)

        @hookimpl
        def mxkit_gradient_compressors():
            yield CompressorSpec(name="topk", factory=_make_topk)
    """


@hookspec
def mxkit_kvstores() -> Iterable[KVStoreSpec]:  # type: ignore[empty-body]
    """Yield KVStore types (``mx.kv.create(name)`` looks them up here).

    mxkit-kvstore registers ``local``, ``device``, ``dist_sync``, ``dist_async`` and
    ``dist_ssp`` (with MXNet's aliases) this way; an outside store (MXNet 1.x plugged
    Horovod and BytePS in like this) subclasses ``mxkit.kvstore.KVStoreBase``.

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import KVStoreSpec

        def make_store(name, **options):
            from my_package.store import MyStore   # a KVStoreBase
            return MyStore(name, **options)

        @hookimpl
        def mxkit_kvstores():
            yield KVStoreSpec(name="mine", factory=make_store)
    """


@hookspec
def mxkit_optimizers() -> Iterable[OptimizerSpec]:  # type: ignore[empty-body]
    """Yield optimizers by registry name, for components that cannot import mxkit-train
    (a KVStore server rebuilds the optimizer a worker sent as ``Optimizer.dumps()`` JSON).

    mxkit-train registers every optimizer of ``mx.optimizer`` this way.

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import OptimizerSpec

        @hookimpl
        def mxkit_optimizers():
            yield OptimizerSpec(name="my_sgd", factory=MySGD)
    """


@hookspec
def mxkit_options() -> Iterable[OptionSpec]:  # type: ignore[empty-body]
    """Yield the configuration keys this plugin reads.

    Every key a component or plugin reads with ``mxkit.core.config.get`` is declared
    here, next to the plugin's other hooks, never as a side effect of importing the
    module that reads it: mxkit collects the keys of every installed plugin before it
    validates ``mxkit.toml``, ``[tool.mxkit]``, ``MXKIT_*`` and ``override()``, so a key
    works whatever was imported first, and a misspelled one fails with the closest names.
    ``mxkit info`` shows which plugin declared each key. Two plugins declaring one key is
    an error naming both.

    Example
    -------
    ::

        from mxkit.core import hookimpl
        from mxkit.core.specs import OptionSpec

        @hookimpl
        def mxkit_options():
            yield OptionSpec("opencl_platform", "int", 0, "which OpenCL platform to use", minimum=0)

    Then ``opencl_platform = 1`` in ``mxkit.toml``, ``MXKIT_OPENCL_PLATFORM=1`` or
    ``config.override(opencl_platform=1)`` sets it, and ``config.get("opencl_platform")``
    reads it.
    """


@hookspec
def mxkit_kernels(registry: Any) -> None:
    """Register backend-specific kernels into the operator registry.

    Called once when mxkit-ndarray builds its operator registry, after every operator is
    defined. A backend overrides only the kernels it can do better than the generic ``xp``
    kernel.

    Example
    -------
    ::

        from mxkit.core import hookimpl

        @hookimpl
        def mxkit_kernels(registry):
            def fast_relu(xp, inputs, outputs, params):
                xp.maximum(inputs[0], 0, out=outputs[0])
            registry.register_kernel("relu", backend="numpy", kernel=fast_relu)
    """


@hookspec
def mxkit_cpu_workers() -> int | None:
    """How many engine worker threads per CPU device this plugin's kernels run best with,
    or None for no preference. Asked when a threaded engine starts with config
    ``cpu_workers`` at 0 (automatic); the smallest answer wins, and with none the engine
    starts one worker per core.

    A plugin whose kernels spread each operation over every core themselves (OpenMP, as
    oneDNN does) answers 1, as MXNet's one CPU worker (``MXNET_CPU_WORKER_NTHREADS``):
    two workers in such kernels at once ask for twice the cores, and libgomp then stops
    its threads' spin-waiting for the whole process, so that each small operation waits
    for its helper threads to wake. The answer must be cheap and must not depend on which
    operators have run.

    Example
    -------
    ::

        from mxkit.core import hookimpl

        @hookimpl
        def mxkit_cpu_workers():
            return 1 if my_library_uses_openmp() else None
    """


HOOK_NAMES = (
    "mxkit_backends",
    "mxkit_engines",
    "mxkit_memory_planners",
    "mxkit_consistency_models",
    "mxkit_gradient_compressors",
    "mxkit_kvstores",
    "mxkit_optimizers",
    "mxkit_options",
    "mxkit_kernels",
    "mxkit_cpu_workers",
)
