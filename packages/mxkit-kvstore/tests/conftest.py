"""Shared test helpers: a small optimizer with MXNet's protocol (mxkit-train is not a dependency)."""

import mxkit.ndarray as nd
import pytest


class MomentumSGD:
    """SGD with momentum, with MXNet's protocol: ``create_state(index, weight)``,
    ``update(index, weight, grad, state)`` and the ``num_update`` counters."""

    def __init__(self, learning_rate=0.1, momentum=0.9):
        self.lr, self.momentum = learning_rate, momentum
        self.created = []
        self.num_update = 0
        self._index_update_count = {}

    def create_state(self, index, weight):
        self.created.append(index)
        return nd.zeros(weight.shape, ctx=weight.context, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        self._index_update_count[index] = self._index_update_count.get(index, 0) + 1
        self.num_update = max(self.num_update, self._index_update_count[index])
        state[:] = state * self.momentum - grad * self.lr
        weight[:] = weight + state


@pytest.fixture
def momentum_sgd():
    """The :class:`MomentumSGD` class."""
    return MomentumSGD


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: needs Ray (mxkit-kvstore[dist]); skipped without it")


@pytest.fixture(scope="session")
def ray_cluster():
    """A loopback Ray cluster for the whole session (2 CPUs, 256 MiB object store).

    Started once (it takes seconds) and stopped at the end; yields its GCS address.
    Skips the test when Ray is not installed.
    """
    pytest.importorskip("ray", reason="the distributed KVStore tests need Ray: pip install 'mxkit-kvstore[dist]'")
    from mxkit.kvstore.dist import runtime

    address = runtime.init_ray(num_cpus=2, object_store_memory=256 * 2**20)
    yield address
    runtime.shutdown_ray()
