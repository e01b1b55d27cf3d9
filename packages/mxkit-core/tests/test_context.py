"""Context: devices, backends resolved through plugins, and the default-context stack."""

import threading
from types import SimpleNamespace

import pytest
from mxkit.core import Context, cpu, current_context, gpu, hookimpl, plugins
from mxkit.core.context import set_thread_default
from mxkit.core.errors import DeviceError
from mxkit.core.specs import BackendSpec


def test_context_identity_equality_hash_repr():
    assert cpu() == Context("cpu", 0) == Context(" CPU ")
    assert cpu(1) != cpu(0)
    assert gpu(0) == Context("cuda", 0)  # cuda is gpu's other spelling
    assert len({cpu(0), Context("cpu", 0), cpu(1)}) == 2
    assert repr(gpu(2)) == "gpu(2)" and str(cpu()) == "cpu(0)"
    assert Context(gpu(3)) == gpu(3)
    assert (cpu().device_typeid, gpu().device_typeid) == (1, 2)


@pytest.mark.parametrize("bad", [-1, 1.0, "0", True])
def test_bad_device_id(bad):
    with pytest.raises(DeviceError, match="non-negative int"):
        Context("cpu", bad)


def test_with_context_sets_the_default_per_thread():
    assert current_context() == cpu(0)
    seen = {}
    with gpu(1):
        assert current_context() == gpu(1)
        with cpu(3):
            assert current_context() == cpu(3)
        worker = threading.Thread(target=lambda: seen.setdefault("other", current_context()))
        worker.start()
        worker.join()
        assert current_context() == gpu(1)
    assert current_context() == cpu(0)
    assert seen["other"] == cpu(0)


def test_default_ctx_is_mxnets_deprecated_spelling_of_the_current_context():
    with pytest.warns(DeprecationWarning, match="default_ctx is deprecated"):
        assert Context.default_ctx == cpu(0)
    with cpu(3), pytest.warns(DeprecationWarning):
        assert Context.default_ctx == cpu(3)
    try:
        with pytest.warns(DeprecationWarning):
            Context.default_ctx = cpu(2)
        assert current_context() == cpu(2)
        with pytest.warns(DeprecationWarning), pytest.raises(DeviceError, match="must be a Context"):
            Context.default_ctx = "cpu"
    finally:
        set_thread_default(None)
    assert current_context() == cpu(0)


def test_gpu_without_a_backend_says_what_to_install():
    with pytest.raises(DeviceError) as info:
        _ = gpu(0).backend
    assert "gpu(0)" in str(info.value) and "mxkit-cuda" in str(info.value)


def test_unknown_device_type_lists_the_available_ones():
    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="fake", device_type="fakedev", factory=lambda i: ("fake", i))

    plugins.register_plugin(SimpleNamespace(mxkit_backends=mxkit_backends), name="fake")
    with pytest.raises(DeviceError, match=r"opencl.*available: fakedev"):
        _ = Context("opencl", 0).backend


def test_backend_is_made_once_per_device():
    made = []

    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="fake", device_type="fakedev", factory=lambda i: made.append(i) or ("fake", i))

    plugins.register_plugin(SimpleNamespace(mxkit_backends=mxkit_backends), name="fake")
    assert Context("fakedev", 1).backend == ("fake", 1)
    assert Context("fakedev", 1).backend == ("fake", 1)
    assert Context("fakedev", 2).backend == ("fake", 2)
    assert made == [1, 2]


def test_num_gpus_and_memory_info_ask_the_gpu_backend_spec():
    from mxkit.core.context import gpu_memory_info, num_gpus

    assert num_gpus() == 0  # the core alone has no gpu backend
    with pytest.raises(DeviceError, match="gpu"):
        gpu_memory_info(0)

    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="fakegpu", device_type="gpu", factory=lambda i: ("fake", i),
                          count_devices=lambda: 3, memory_info=lambda i: (100 * (i + 1), 1000))

    plugins.register_plugin(SimpleNamespace(mxkit_backends=mxkit_backends), name="fakegpu")
    assert num_gpus() == 3
    assert gpu_memory_info(1) == (200, 1000)


def test_gpu_memory_info_from_a_backend_that_cannot_tell_says_so():
    from mxkit.core.context import gpu_memory_info, num_gpus

    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="bare", device_type="gpu", factory=lambda i: ("bare", i))

    plugins.register_plugin(SimpleNamespace(mxkit_backends=mxkit_backends), name="bare")
    assert num_gpus() == 0
    with pytest.raises(DeviceError, match="does not report device memory"):
        gpu_memory_info(0)
