"""A device whose kernels only queue work (``Backend.launches_asynchronously``, a GPU) has its
ready operations run on the thread that pushes them, imperative calls and executor phases alike;
a device whose kernels compute before they return hands large ones to a worker.

Why it matters: a worker that is handed a GPU operation must first win the GIL from the thread
still pushing, so the device idles until that thread blocks or the interpreter's switch interval
(5 ms) passes. The devices here are host memory under other names, so the thread each operation
ran on can be seen without a GPU.
"""

import threading
import types

import mxkit.engine as engine
import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core import Context, hookimpl
from mxkit.core.specs import BackendSpec
from mxkit.ndarray import invoke
from mxkit.ndarray.backend import Backend, as_backend

RAN_ON: list[int] = []


class _HostMemory(Backend):
    """numpy under another device type; records the thread each operation runs on."""

    xp = np

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def from_host(self, array):
        return np.array(array, copy=True)

    def to_host(self, array):
        return np.array(array, copy=True)

    def bind_to_device(self, fn):
        def on_device():
            RAN_ON.append(threading.get_ident())
            return fn()

        return on_device


class Queued(_HostMemory):
    name, device_type = "queued", "queued"
    launches_asynchronously = True


class Computing(_HostMemory):
    name, device_type = "computing", "computing"


@hookimpl
def _backends():
    yield BackendSpec(name="queued", device_type="queued", factory=Queued)
    yield BackendSpec(name="computing", device_type="computing", factory=Computing)


@pytest.fixture
def threaded():
    from mxkit.core import plugins
    from mxkit.ndarray.registry import reload_kernels

    plugin = types.SimpleNamespace(mxkit_backends=_backends)
    plugins.register_plugin(plugin, name="queued-launches-test")
    reload_kernels()
    previous = engine.set_engine(engine.create("threaded_per_device"))
    RAN_ON.clear()
    try:
        yield
    finally:
        engine.get().wait_all()
        if previous is None:
            engine.reset()
        else:
            engine.set_engine(previous)
        plugins.get_plugin_manager().unregister(plugin)
        plugins.reset_plugin_manager()
        reload_kernels()


def _on_threads(ctx):
    """Threads that ran each operation of a few large imperative calls (over the small-op size)."""
    x = nd.array(np.ones((1024, 1024), np.float32), ctx=ctx)  # 4 MiB: large for a CPU
    x.wait_to_read()
    RAN_ON.clear()
    y = x + 1
    z = nd.relu(y) * 2
    result = z.asnumpy()
    np.testing.assert_array_equal(result, np.full((1024, 1024), 4.0, np.float32))
    return list(RAN_ON)


def test_ready_operations_of_a_queuing_device_run_on_the_pushing_thread(threaded):
    threads = _on_threads(Context("queued", 0))
    assert len(threads) >= 3 and set(threads) == {threading.get_ident()}


def test_large_operations_of_a_computing_device_go_to_a_worker(threaded):
    threads = _on_threads(Context("computing", 0))
    assert len(threads) >= 3 and threading.get_ident() not in threads


def test_an_executor_phase_on_a_queuing_device_runs_on_the_pushing_thread(threaded):
    net = sym.FullyConnected(sym.Variable("data"), num_hidden=4, name="fc")
    for ctx, here in ((Context("queued", 0), True), (Context("computing", 0), False)):
        exe = net.simple_bind(ctx, data=(2, 3))
        exe.arg_dict["data"][:] = np.ones((2, 3), np.float32)
        exe.arg_dict["fc_weight"][:] = np.ones((4, 3), np.float32)
        exe.arg_dict["fc_bias"][:] = np.zeros(4, np.float32)
        nd.waitall()
        RAN_ON.clear()
        exe.forward(is_train=True)
        exe.backward(nd.ones((2, 4), ctx=ctx))
        np.testing.assert_array_equal(exe.grad_dict["fc_weight"].asnumpy(), np.full((4, 3), 2.0, np.float32))
        phases = list(RAN_ON)
        assert phases, ctx
        assert (set(phases) == {threading.get_ident()}) is here, (ctx, phases)


def test_a_pending_dependency_still_hands_the_operation_to_a_worker(threaded):
    ctx = Context("queued", 0)
    x = nd.array(np.ones(4, np.float32), ctx=ctx)
    x.wait_to_read()
    release = threading.Event()
    # an operation on another device holds x until released: what reads x cannot start at once
    engine.get().push(lambda: release.wait(10), (), (x.var,), None, 0, "holder")
    RAN_ON.clear()
    y = x * 3
    release.set()
    np.testing.assert_array_equal(y.asnumpy(), np.full(4, 3.0, np.float32))
    assert RAN_ON and threading.get_ident() not in RAN_ON


def test_push_kernel_counts_an_unsized_kernel_as_large_on_a_cpu(threaded):
    done = []
    var = engine.get().new_var()
    invoke.push_kernel(engine.get(), lambda: done.append(threading.get_ident()), [], [var], Context("cpu", 0),
                       "phase", None)
    engine.get().wait_for_var(var)
    assert done and done[0] != threading.get_ident()


def test_a_duck_typed_backend_keeps_its_launch_mode():
    class Duck:
        name, device_type, xp = "duck", "duck", np
        launches_asynchronously = True

        def empty(self, shape, dtype):
            return np.empty(shape, dtype)

        def from_host(self, array):
            return np.array(array)

        def to_host(self, array):
            return array

    assert as_backend(Duck(), "duck").launches_asynchronously is True
    assert Backend.launches_asynchronously is False
