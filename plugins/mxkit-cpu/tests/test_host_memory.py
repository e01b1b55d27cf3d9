"""Freed large host buffers leave the process (config ``cpu_malloc_mmap_threshold``, glibc only).

Each case runs in a fresh interpreter: the threshold is applied once per process, when the first
CPU device is made, and glibc's moving threshold is state that earlier tests would have moved.
"""

import ctypes
import os
import subprocess
import sys

import pytest


def _is_glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except (OSError, AttributeError):
        return False
    return sys.platform.startswith("linux")


pytestmark = pytest.mark.skipif(not _is_glibc(), reason="the option acts on glibc's malloc only")

# Prints how many MiB the process's resident set shrank by when four 16 MiB arrays were freed.
# They are allocated after one 16 MiB array was freed (glibc's moving threshold then serves blocks
# of that size from the heap) and below a fifth that stays (so freeing them cannot trim the heap's top).
PROBE = """
import numpy as np
import mxkit.ndarray as nd

nd.ones((2,)).asnumpy()

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

np.ones(16 << 18, dtype=np.float32)
blocks = [np.ones(16 << 18, dtype=np.float32) for _ in range(4)]
keep = np.ones(16 << 18, dtype=np.float32)
before = rss()
del blocks
print((before - rss()) >> 20)
"""


def _returned_mib(threshold: int | None) -> int:
    env = {key: value for key, value in os.environ.items() if key != "MXKIT_CPU_MALLOC_MMAP_THRESHOLD"}
    if threshold is not None:
        env["MXKIT_CPU_MALLOC_MMAP_THRESHOLD"] = str(threshold)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    return int(done.stdout.split()[-1])


def test_freed_large_arrays_return_their_memory_with_the_threshold_held():
    assert _returned_mib(None) >= 60  # the default (1 MiB): each 16 MiB block was a mapping of its own


def test_glibcs_moving_threshold_keeps_them_resident_when_the_option_is_zero():
    # the control: without the option the same frees leave the memory in the process
    assert _returned_mib(0) < 16


def test_the_option_is_applied_once_and_reports_whether_it_holds(monkeypatch):
    from mxkit_cpu import host_memory

    monkeypatch.setattr(host_memory, "_outcome", None)
    from mxkit.core import config

    with config.override(cpu_malloc_mmap_threshold=0):
        assert host_memory.hold_mmap_threshold() is False
        assert host_memory.hold_mmap_threshold() is False  # applied once: the first answer stays
    monkeypatch.setattr(host_memory, "_outcome", None)
    with config.override(cpu_malloc_mmap_threshold=128 * 1024):
        assert host_memory.hold_mmap_threshold() is True


def test_a_negative_threshold_is_a_config_error():
    from mxkit.core import config
    from mxkit.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cpu_malloc_mmap_threshold"):
        with config.override(cpu_malloc_mmap_threshold=-1):
            config.get("cpu_malloc_mmap_threshold")
