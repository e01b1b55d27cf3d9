import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gluon_testing_nets (importlib import mode)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_path():
    return lambda name: str(FIXTURES / name)


@pytest.fixture
def fresh_names():
    """A fresh symbol name manager, so top-level blocks are numbered from 0 as in a new MXNet process."""
    from mxkit.symbol.name import NameManager

    with NameManager():
        yield


def pytest_configure(config):
    config.addinivalue_line("markers", "ray: needs Ray (mxkit-kvstore[dist]); skipped without it")


@pytest.fixture(scope="session")
def start_dist_job():
    """``start_dist_job(num_workers, num_servers)``: a distributed-store job on a loopback Ray
    cluster (2 CPUs), stopped, with the cluster, at the end of the session."""
    pytest.importorskip("ray", reason="the distributed Trainer tests need Ray: pip install 'mxkit-kvstore[dist]'")
    import ray
    from mxkit.kvstore.dist import runtime
    from mxkit.kvstore.dist.job import start_job

    started_here = not ray.is_initialized()  # else another package's session cluster: left running
    runtime.init_ray(num_cpus=2, object_store_memory=256 * 2**20)
    jobs = []

    def make(num_workers, num_servers, **options):
        job = start_job(num_workers, num_servers, **options)
        jobs.append(job)
        return job

    yield make
    for job in jobs:
        job.stop()
    if started_here:
        runtime.shutdown_ray()
