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
    import ray
    from mxkit.kvstore.dist import runtime

    started_here = not ray.is_initialized()  # else another package's session cluster: left running
    address = runtime.init_ray(num_cpus=2, object_store_memory=256 * 2**20)
    yield address
    if started_here:
        runtime.shutdown_ray()


@pytest.fixture(scope="session")
def start_job(ray_cluster):
    """``start_job(num_workers, num_servers, **options)``: a job on the session cluster,
    stopped at the end of the session (jobs are cheap next to a cluster: about 2 s)."""
    from mxkit.kvstore.dist.job import start_job as start

    jobs = []

    def make(num_workers, num_servers, **options):
        job = start(num_workers, num_servers, **options)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.stop()


@pytest.fixture(scope="session")
def shared_job(start_job):
    """``shared_job(num_workers, num_servers)``: one dist_sync job per size for the whole
    session (big-array bound 50), for tests that use their own keys and set no optimizer,
    compression or other consistency model (those are per job)."""
    jobs = {}

    def get(num_workers, num_servers):
        if (num_workers, num_servers) not in jobs:
            jobs[(num_workers, num_servers)] = start_job(num_workers, num_servers, bigarray_bound=50)
        return jobs[(num_workers, num_servers)]

    return get


def run_workers(job, worker, kind="dist_sync", timeout=20.0, **options):
    """Run ``worker(kv)`` in one thread per rank of ``job``, each with its own store (whose
    waits time out after ``timeout`` seconds, so a failing worker cannot hang the others);
    return the results by rank, re-raising the first error."""
    from concurrent.futures import ThreadPoolExecutor

    import mxkit.kvstore as kvstore

    def run(rank):
        kv = kvstore.create(kind, rank=rank, num_workers=job.num_workers, namespace=job.namespace,
                            timeout=timeout, **options)
        return worker(kv)

    with ThreadPoolExecutor(job.num_workers) as pool:
        futures = [pool.submit(run, rank) for rank in range(job.num_workers)]
        return [future.result() for future in futures]


@pytest.fixture
def workers():
    """:func:`run_workers`."""
    return run_workers
