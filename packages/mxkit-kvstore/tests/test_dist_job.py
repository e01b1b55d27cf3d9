"""Job.stop after the cluster is gone: nothing to kill, and no new cluster started to find that out."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray", reason="the distributed KVStore tests need Ray: pip install 'mxkit-kvstore[dist]'")


def test_stopping_a_job_after_ray_shut_down_starts_no_cluster():
    # in a fresh interpreter, so the session's cluster is not touched; Ray is imported, not started
    script = textwrap.dedent("""
        import ray
        from mxkit.kvstore.dist.job import Job

        job = Job("mxkit-gone", 1, 1, coordinator=object(), servers=[object()])
        job.stop()
        job.stop()  # idempotent
        print("initialized" if ray.is_initialized() else "untouched")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "untouched"
