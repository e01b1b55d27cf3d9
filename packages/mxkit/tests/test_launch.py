"""``mxkit launch`` for real: a local Ray cluster, KVStore servers, worker processes, teardown.

Each test runs the launcher as a command, as a user would, with a marker variable in its
environment that every process it starts inherits (Ray's own included), so that the test
can check that none of them outlives it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="mxkit launch needs the distributed KVStore: pip install 'mxkit-kvstore[dist]'")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MARKER = "MXKIT_LAUNCH_TEST_MARKER"


def _tagged_processes(tag: str) -> list[int]:
    """PIDs of live processes whose environment carries ``MARKER=tag``."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def _launch(args: list[str], tag: str, cache: Path | None = None, drop_env: tuple[str, ...] = (),
            **popen: object) -> subprocess.Popen:
    env = {name: value for name, value in os.environ.items() if name not in drop_env}
    env[MARKER] = tag
    if cache is not None:  # a fresh digits cache, which both workers pack at once
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.Popen([sys.executable, "-m", "mxkit.mx.cli", "launch", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _assert_nothing_left(tag: str) -> None:
    deadline = time.monotonic() + 20  # Ray's processes exit shortly after the driver shuts down
    while _tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert _tagged_processes(tag) == [], "processes of the launch outlived it"


@pytest.fixture
def worker_script(tmp_path):
    def write(body: str) -> str:
        path = tmp_path / "worker.py"
        path.write_text(textwrap.dedent(body))
        return str(path)

    return write


def test_two_workers_sum_through_the_servers_and_everything_is_torn_down(worker_script, tmp_path):
    script = worker_script("""
        import os
        import numpy as np
        from mxkit import mx

        kv = mx.kv.create("dist_sync")
        assert kv.rank == int(os.environ["MXKIT_RANK"]) and kv.num_workers == 2
        kv.init("w", mx.nd.zeros((3,)))
        kv.push("w", mx.nd.full((3,), kv.rank + 1.0))
        out = mx.nd.zeros((3,))
        kv.pull("w", out=out)
        print("rank", kv.rank, "sees", out.asnumpy().tolist(), flush=True)
        kv.barrier()
        """)
    tag = uuid.uuid4().hex
    launcher = _launch(["-n", "2", "-s", "2", "--", sys.executable, script], tag, cache=tmp_path / "cache")
    out, err = launcher.communicate(timeout=200)
    assert launcher.returncode == 0, err
    # both workers see the sum of both pushes, and each line carries its worker's rank
    assert "[0] rank 0 sees [3.0, 3.0, 3.0]" in out, out
    assert "[1] rank 1 sees [3.0, 3.0, 3.0]" in out, out
    # the wait for Ray is announced; Ray's own notices go to a file that the launcher names
    assert err.index("starting a local Ray cluster") < err.index("2 servers on Ray")
    assert "Started a local Ray instance" not in err and "Token authentication" not in err, err
    (log,) = (tmp_path / "cache" / "mxkit" / "logs").glob("launch-*.log")
    assert str(log) in err and "Started a local Ray instance" in log.read_text()
    _assert_nothing_left(tag)


def test_a_failing_worker_fails_the_launch_and_stops_the_others(worker_script, tmp_path):
    # rank 0 prints without flushing, as a plain print to a pipe does, before rank 1 fails: the
    # line must still reach the launcher's output although rank 0 is then stopped by a signal
    script = worker_script(f"""
        import os, sys, time
        rank = int(os.environ["MXKIT_RANK"])
        folder = {str(tmp_path)!r}
        open(os.path.join(folder, f"pid{{rank}}"), "w").write(str(os.getpid()))
        if rank == 1:
            deadline = time.monotonic() + 100
            while not os.path.exists(os.path.join(folder, "printed0")) and time.monotonic() < deadline:
                time.sleep(0.05)
            print("giving up", flush=True)
            sys.exit(3)
        print("waiting for rank 1")
        open(os.path.join(folder, "printed0"), "w").close()
        time.sleep(600)  # a worker that would wait forever for the failed one
        """)
    tag = uuid.uuid4().hex
    started = time.monotonic()
    launcher = _launch(["-n", "2", "--", sys.executable, script], tag, drop_env=("PYTHONUNBUFFERED",))
    out, err = launcher.communicate(timeout=200)
    assert launcher.returncode == 3, f"stdout:\n{out}\nstderr:\n{err}"  # what went wrong, should it fail under load
    assert "[1] giving up" in out
    assert "[0] waiting for rank 1" in out, out
    assert "worker 1 exited with status 3" in err
    assert time.monotonic() - started < 120  # not the sleeping worker's 600 s
    _assert_nothing_left(tag)


def test_interrupting_the_launcher_stops_the_job(worker_script, tmp_path):
    ready = tmp_path / "ready"
    script = worker_script(f"""
        import os, time
        open({str(ready)!r} + os.environ["MXKIT_RANK"], "w").close()
        time.sleep(600)
        """)
    tag = uuid.uuid4().hex
    launcher = _launch(["-n", "2", "--", sys.executable, script], tag)
    deadline = time.monotonic() + 150
    while not all(Path(f"{ready}{rank}").exists() for rank in range(2)):
        assert time.monotonic() < deadline and launcher.poll() is None, launcher.communicate()
        time.sleep(0.2)
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 130, err
    assert "interrupted" in err
    _assert_nothing_left(tag)


def test_a_missing_worker_program_is_a_clear_error(tmp_path):
    tag = uuid.uuid4().hex
    launcher = _launch(["-n", "1", "--", str(tmp_path / "no-such-program")], tag)
    _, err = launcher.communicate(timeout=200)
    assert launcher.returncode == 2
    assert "could not start worker 0" in err and "no-such-program" in err
    _assert_nothing_left(tag)


def test_mxkit_train_runs_data_parallel_under_the_launcher(tmp_path):
    tag = uuid.uuid4().hex
    prefix = tmp_path / "model" / "mlp"
    launcher = _launch(["-n", "2", "-s", "1", "--", sys.executable, "-m", "mxkit.mx.cli", "train", "--network", "mlp",
                        "--kvstore", "dist_sync", "--epochs", "2", "--model-prefix", str(prefix)], tag,
                       cache=tmp_path / "cache", cwd=str(tmp_path))
    out, err = launcher.communicate(timeout=200)
    assert launcher.returncode == 0, out + err
    assert "[0] mxkit train: mlp" in out and "worker 0 of 2 (dist_sync)" in out and "worker 1 of 2" in out
    finals = re.findall(r"^\[(\d)\] validation accuracy (\d\.\d+) after 2 epochs", out, re.MULTILINE)
    # dist_sync: both workers hold the same weights, so they score the same on the same validation set
    assert sorted(rank for rank, _ in finals) == ["0", "1"] and finals[0][1] == finals[1][1], out
    assert float(finals[0][1]) > 0.8
    assert (tmp_path / "model" / "mlp-0002.params").exists()
    _assert_nothing_left(tag)
