"""The Ray runtime: a local cluster bound to loopback only, and what joining it takes."""

import os

import pytest
from mxkit.core.errors import KVStoreError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


def _host(address):
    return address.rsplit(":", 1)[0]


def test_every_address_ray_reports_is_loopback(ray_cluster):
    import ray

    assert _host(ray_cluster) == "127.0.0.1"
    assert _host(ray.get_runtime_context().gcs_address) == "127.0.0.1"
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    nodes = ray.nodes()
    assert nodes
    for node in nodes:
        assert node["NodeManagerAddress"] == "127.0.0.1", node
        assert node["alive"]
        assert _host(node["ObjectStoreSocketName"]) != node["ObjectStoreSocketName"] or \
            node["ObjectStoreSocketName"].startswith("/")  # a Unix socket, not a network address


def test_worker_environment_names_the_cluster(ray_cluster):
    from mxkit.kvstore.dist import runtime

    env = runtime.worker_environment()
    assert env["MXKIT_RAY_ADDRESS"] == ray_cluster
    assert env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert env["RAY_AUTH_MODE"] == "token"
    # the token a joining process needs is where its HOME says
    assert os.path.isfile(os.path.join(env["HOME"], ".ray", "auth_token"))
    assert os.path.isdir(env["RAY_TMPDIR"])


def test_init_ray_reuses_the_running_cluster(ray_cluster):
    from mxkit.kvstore.dist import runtime

    assert runtime.init_ray() == ray_cluster


@pytest.mark.parametrize("address", ["", "localhost", "host:port", 6379])
def test_bad_addresses_are_rejected(address):
    pytest.importorskip("ray")
    from mxkit.kvstore.dist import runtime

    with pytest.raises(KVStoreError, match="HOST:PORT"):
        runtime.init_ray(address)


def test_a_subprocess_joins_with_the_worker_environment(ray_cluster):
    import subprocess
    import sys

    from mxkit.kvstore.dist import runtime

    env = {**os.environ, **runtime.worker_environment()}
    script = ("import os, ray; ray.init(address=os.environ['MXKIT_RAY_ADDRESS'], log_to_driver=False); "
              "print(ray.get_runtime_context().gcs_address, ray.util.get_node_ip_address())")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [ray_cluster, "127.0.0.1"]
