"""The hook implementations of the example plugin.

It registers, without touching mxkit's code:

- a backend for device type ``recorder`` (:mod:`mxkit_recorder_plugin.backend`): arrays on
  it are created, computed on and copied to and from the host, and it records which device
  objects were made and every transfer;
- a kernel override (:mod:`mxkit_recorder_plugin.kernels`): ``relu`` on a ``recorder`` device
  runs the plugin's kernel;
- a memory planner ``recorder_apart`` that gives every entry its own buffer (through
  mxkit-memplan's ``none`` strategy) and records each call;
- a consistency model ``recorder_immediate`` that applies every push at once.
"""

from mxkit.core import hookimpl
from mxkit.core.specs import BackendSpec, ConsistencySpec, PlannerSpec

#: every call the plugin's objects saw, for tests to inspect
CALLS: list[tuple[str, object]] = []


def make_backend(device_id: int):
    """The backend of ``recorder(device_id)`` (mxkit-ndarray is imported on first use, not at plugin load)."""
    from mxkit_recorder_plugin.backend import RecorderBackend

    return RecorderBackend(device_id)


def plan_apart(graph, **options):
    """Every entry in a buffer of its own; records the graph it was asked to plan."""
    from mxkit.memplan import plan_memory  # heavy import deferred to the first call

    CALLS.append(("planner", graph))
    return plan_memory(graph, "none", **options)


class ImmediateConsistency:
    """Apply each push as it arrives (no waiting for other workers)."""

    def __init__(self, num_workers: int = 1, **options):
        self.num_workers = num_workers
        CALLS.append(("consistency", num_workers))

    def ready_to_apply(self, pushes_received: int) -> bool:
        return pushes_received >= 1


@hookimpl
def mxkit_backends():
    yield BackendSpec(name="recorder", device_type="recorder", factory=make_backend,
                      description="numpy memory behind a device interface, transfers recorded (example plugin)")


@hookimpl
def mxkit_kernels(registry):
    from mxkit_recorder_plugin.kernels import register

    register(registry)


@hookimpl
def mxkit_memory_planners():
    yield PlannerSpec(name="recorder_apart", planner=plan_apart,
                      description="one buffer per entry, recorded (example plugin)")


@hookimpl
def mxkit_consistency_models():
    yield ConsistencySpec(name="recorder_immediate", model=ImmediateConsistency,
                          description="apply every push at once (example plugin)")
