"""The published backend interface (mxkit.ndarray.backend): required members are checked
when a backend class is defined or its device first used, and the defaults work."""

import types

import numpy as np
import pytest
from mxkit.core import Context, hookimpl
from mxkit.core.errors import PluginError
from mxkit.core.specs import BackendSpec
from mxkit.ndarray import backend as backend_module
from mxkit.ndarray.backend import REQUIRED_MEMBERS, Backend, as_backend


class HostMemory(Backend):
    name, device_type, xp = "hostmem", "hostmem", np

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def from_host(self, array):
        return np.array(array, copy=True)

    def to_host(self, array):
        return np.array(array, copy=True)


def test_a_subclass_without_a_required_method_fails_when_defined_naming_it():
    with pytest.raises(PluginError, match=r"does not implement the required member 'empty'.*Writing a backend"):
        class NoEmpty(Backend):
            name, device_type, xp = "x", "x", np

            def from_host(self, array):
                return array

            def to_host(self, array):
                return array


def test_an_object_missing_members_is_refused_naming_each():
    class Partial:
        name = "partial"
        xp = np

        def empty(self, shape, dtype):
            return np.empty(shape, dtype)

    with pytest.raises(PluginError, match=r"device type 'partial'.*members 'device_type', 'from_host', 'to_host'"):
        as_backend(Partial(), "partial")


def test_a_duck_typed_backend_is_completed_with_the_defaults():
    class Duck:
        name, device_type, xp = "duck", "duck", np

        def empty(self, shape, dtype):
            return np.empty(shape, dtype)

        def from_host(self, array):
            return np.array(array)

        def to_host(self, array):
            return array

        def make_rng(self, seed):
            return "own generator"

    duck = Duck()
    completed = as_backend(duck, "duck")
    assert isinstance(completed, Backend) and completed.empty == duck.empty
    assert completed.make_rng(1) == "own generator"   # its own member wins
    assert completed.bind_to_device(len) is len        # the default fills the gap
    np.testing.assert_array_equal(completed.full((2,), 7, np.int32), [7, 7])


def test_defaults_of_a_subclass():
    backend = HostMemory(3)
    assert backend.device_id == 3 and as_backend(backend) is backend
    np.testing.assert_array_equal(backend.zeros((2, 2), np.float32), np.zeros((2, 2)))
    target = backend.empty((2, 3), np.float32)
    backend.copy_from_host(target, np.arange(3))
    np.testing.assert_array_equal(target, [[0, 1, 2], [0, 1, 2]])
    other = HostMemory(4)
    moved = other.empty((2, 3), np.float32)
    backend.copy_to(target, moved, other)
    np.testing.assert_array_equal(moved, target)
    assert backend.make_rng(5).random() == np.random.default_rng(5).random()
    np.testing.assert_array_equal(backend.from_dlpack(np.arange(3)), [0, 1, 2])
    backend.synchronize()
    assert backend.memory_stats() == {} and "hostmem(3)" in repr(backend)
    ran: list[int] = []
    assert backend.record(lambda: ran.append(1)) is None  # no recording unless the backend offers one (CUDA graphs)
    assert ran == []
    assert set(REQUIRED_MEMBERS) == {"name", "device_type", "xp", "empty", "from_host", "to_host"}
    assert set(backend_module.__all__) >= {"Backend", "as_backend", "REQUIRED_MEMBERS"}


def test_a_registered_backend_missing_a_member_fails_at_first_use_with_a_clear_error():
    from mxkit.core import plugins
    from mxkit.core.context import clear_backend_cache
    from mxkit.ndarray import ones

    class NoHost:
        name, device_type, xp = "nohost", "nohost", np

        def __init__(self, device_id):
            self.device_id = device_id

        def empty(self, shape, dtype):
            return np.empty(shape, dtype)

    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="nohost", device_type="nohost", factory=NoHost)

    name = plugins.register_plugin(types.SimpleNamespace(mxkit_backends=mxkit_backends), name="test-nohost")
    clear_backend_cache()
    try:
        with pytest.raises(PluginError, match="lacks the required members 'from_host', 'to_host'"):
            ones((2,), ctx=Context("nohost", 0))
    finally:
        plugins.unregister_plugin(name)
        clear_backend_cache()
