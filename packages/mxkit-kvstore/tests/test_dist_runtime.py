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


def test_the_local_clusters_directories_are_private(ray_cluster):
    import stat

    from mxkit.kvstore.dist import runtime

    if not runtime.is_started_here():
        pytest.skip("the session's cluster was not started by this process")
    # Ray makes RAY_TMPDIR itself 0777 whenever a process joins: its parent is what keeps others out
    for directory in (os.path.dirname(os.environ["RAY_TMPDIR"]), os.environ["HOME"]):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory


def _closed_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_cluster_is_given_up_on_after_the_timeout():
    import time

    pytest.importorskip("ray")
    from mxkit.kvstore.dist import runtime

    started = time.monotonic()
    with pytest.raises(KVStoreError, match=r"no Ray cluster answers at '127\.0\.0\.1:\d+'.*gave up after 1 s"):
        runtime.wait_reachable(f"127.0.0.1:{_closed_port()}", 1.0)
    assert time.monotonic() - started < 10


def _launch(port, timeout):
    import subprocess
    import sys

    env = {**os.environ, "MXKIT_KVSTORE_TIMEOUT": str(timeout)}
    code = "import sys; from mxkit.mx.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, "launch", "-n", "1", "--address", f"127.0.0.1:{port}",
                             "--", sys.executable, "-c", "print('hi')"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_mxkit_launch_to_an_unreachable_address_fails_clearly_after_kvstore_timeout():
    pytest.importorskip("ray")
    pytest.importorskip("mxkit.mx")
    process = _launch(_closed_port(), 2)
    out, err = process.communicate(timeout=60)
    assert process.returncode != 0
    assert "no Ray cluster answers" in err and "kvstore_timeout" in err and "hi" not in out


def test_mxkit_launch_honours_ctrl_c_and_sigterm_while_waiting_for_a_cluster():
    import signal
    import time

    pytest.importorskip("ray")
    pytest.importorskip("mxkit.mx")
    for signum in (signal.SIGINT, signal.SIGTERM):
        process = _launch(_closed_port(), 600)
        time.sleep(4)  # well into the wait (the interpreter and mxkit start first)
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
        assert process.returncode not in (0, None) and "hi" not in out, (signum, err[-2000:])


def _listening(process):
    """The TCP addresses ``process`` listens on (``[]`` when it is gone or not ours to see)."""
    import psutil

    connections = getattr(process, "net_connections", None) or process.connections
    try:
        return [conn.laddr for conn in connections(kind="inet") if conn.status == psutil.CONN_LISTEN]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def test_a_local_job_starts_no_dashboard_and_listens_on_loopback_only(ray_cluster, start_job):
    psutil = pytest.importorskip("psutil")
    import ray
    from mxkit.kvstore.dist import runtime

    if not runtime.is_started_here():
        pytest.skip("the session's cluster was not started by this process")
    job = start_job(1, 1)
    server = job.servers[0]
    channel_host, channel_port = ray.get(server.channel_address.remote(), timeout=60)
    server_pid = ray.get(server.__ray_call__.remote(lambda actor: os.getpid()), timeout=60)
    # the cluster's processes: this driver's descendants (GCS, raylet, its workers and agents)
    cluster = [psutil.Process(), *psutil.Process().children(recursive=True)]
    commands = {}
    for process in cluster:
        try:
            commands[process.pid] = " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    assert not [c for c in commands.values() if "dashboard.py" in c], "Ray's dashboard process was started"
    listeners = {process.pid: _listening(process) for process in cluster}
    everything = [address for addresses in listeners.values() for address in addresses]
    assert everything
    assert {address.ip for address in everything} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listeners
    # the server listens on its Ray worker's port and on its data channel, nothing else
    assert len(listeners[server_pid]) == 2 and channel_port in {a.port for a in listeners[server_pid]}
    assert channel_host == "127.0.0.1"
