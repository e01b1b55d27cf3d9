"""Values on a device whose memory the CPU cannot read directly (a stand-in for a GPU).

The ``offhost`` backend keeps numpy arrays, but as a device type of its own the store must
move data through ``to_host``/``from_host``, as it would for a GPU; the backend counts those.
"""

from typing import ClassVar

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import Context, cpu, hookimpl
from mxkit.core.specs import BackendSpec
from mxkit.kvstore import create


class OffHostBackend:
    name = "offhost"
    device_type = "offhost"
    xp = np
    transfers: ClassVar[dict[str, int]] = {"to_host": 0, "from_host": 0}

    def __init__(self, device_id):
        self.device_id = device_id

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def from_host(self, array):
        OffHostBackend.transfers["from_host"] += 1
        return np.array(array, copy=True)

    def to_host(self, array):
        OffHostBackend.transfers["to_host"] += 1
        return array

    def make_rng(self, seed):
        return np.random.default_rng(seed)


class _OffHostPlugin:
    @hookimpl
    def mxkit_backends(self):
        yield BackendSpec(name="offhost", device_type="offhost", factory=OffHostBackend)


@pytest.fixture
def offhost():
    from mxkit.core import plugins
    from mxkit.core.context import clear_backend_cache

    name = plugins.register_plugin(_OffHostPlugin(), name="test-offhost")
    clear_backend_cache()
    yield lambda i: Context("offhost", i)
    plugins.unregister_plugin(name)
    clear_backend_cache()


@pytest.mark.parametrize("kvtype", ["local", "device"])
@pytest.mark.parametrize("compression", [None, {"type": "2bit", "threshold": 0.5}])
def test_values_on_another_memory_space_are_moved_through_the_backend(kvtype, compression, offhost):
    devices = [offhost(0), offhost(1), cpu(1), offhost(1)]  # two values from one device
    kv = create(kvtype)
    if compression:
        kv.set_gradient_compression(compression)
    kv.init("w", nd.array(np.zeros((4, 5), np.float32), ctx=offhost(0)))
    rng = np.random.default_rng(3)
    grads = [rng.integers(-3, 4, (4, 5)).astype(np.float32) for _ in devices]
    before = dict(OffHostBackend.transfers)
    kv.push("w", [nd.array(g, ctx=d) for g, d in zip(grads, devices)])
    outs = [nd.zeros((4, 5), ctx=d) for d in devices]
    kv.pull("w", out=outs)
    if compression:  # integers: +-0.5 per element and push, whatever the size
        expected = sum(np.sign(g) * 0.5 for g in grads)
    else:
        expected = sum(grads)
    for out in outs:
        np.testing.assert_array_equal(out.asnumpy(), expected)
    moved = {k: OffHostBackend.transfers[k] - before[k] for k in before}
    assert moved["to_host"] > 0 and moved["from_host"] > 0


def test_device_store_sums_on_an_off_host_device_when_it_is_least_loaded(offhost):
    kv = create("device")
    kv.init([0, 1], [nd.zeros((8,)), nd.zeros((2,))])
    kv.push(0, [nd.ones((8,), ctx=offhost(0)), nd.ones((8,), ctx=cpu(0))])
    assert kv._entries[0].value.context == offhost(0)  # the largest key goes to the first device
    assert kv._entries[1].value.context == cpu(0)
    out = nd.zeros((8,), ctx=cpu(2))
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(8, 2.0))
