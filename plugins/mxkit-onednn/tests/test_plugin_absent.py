"""Without oneDNN (its library missing, the extension not importable, or the plugin disabled) the plugin
logs one clear message, registers nothing, and mxkit-cpu's kernels serve."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s: %(message)s")
    {prepare}
    import numpy as np
    from mxkit.ndarray.registry import get_registry
    from mxkit_cpu import conv as cpu_conv
    op = get_registry().get("Convolution")
    kernel = op.kernel_for("numpy")
    assert kernel is cpu_conv.KERNELS["Convolution"], kernel
    params = op.parse_params(dict(kernel=(3, 3), num_filter=3, no_bias=True, pad=(1, 1)))
    y = np.empty((1, 3, 4, 4), np.float32)
    kernel(np, [np.ones((1, 2, 4, 4), np.float32), np.ones((3, 2, 3, 3), np.float32)], [y], params)
    assert y[0, 0, 1, 1] == 18.0 and y[0, 0, 0, 0] == 8.0, y
    print("CPU KERNELS SERVED")
""")

MISSING_LIBRARY = """
import mxkit_onednn.library as library
library.candidate_paths = lambda: []   # no libdnnl.so.3 anywhere it looks
sys.modules["mxkit_onednn._dnnl"] = None  # and the extension cannot resolve it either
"""


def _run(prepare: str, **env: str) -> str:
    import os

    # The caller's own MXKIT_ONEDNN_DISABLE would change which message the child logs; each test sets it itself.
    inherited = {k: v for k, v in os.environ.items() if k != "MXKIT_ONEDNN_DISABLE"}
    result = subprocess.run([sys.executable, "-c", CHECK.format(prepare=prepare)], capture_output=True, text=True,
                            timeout=120, env={**inherited, **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_missing_library_logs_one_message_and_the_cpu_kernels_serve():
    out = _run(MISSING_LIBRARY)
    messages = [line for line in out.splitlines() if line.startswith("mxkit.onednn:")]
    assert len(messages) == 1, out
    assert "oneDNN could not be loaded" in messages[0] and "onednn-cpu-gomp==2023.2.0" in messages[0]
    assert "libdnnl.so.3" in messages[0]
    assert "CPU KERNELS SERVED" in out


@pytest.mark.slow
def test_disabled_plugin_leaves_the_cpu_kernels():
    out = _run("", MXKIT_ONEDNN_DISABLE="1")
    assert "disabled by config onednn_disable (environment MXKIT_ONEDNN_DISABLE)" in out and "CPU KERNELS SERVED" in out


@pytest.mark.slow
def test_without_the_plugin_the_cpu_kernels_serve():
    # the plugin's entry point blocked, as if the distribution were not installed
    prepare = ("from importlib import metadata\n"
               "real = metadata.entry_points\n"
               "metadata.entry_points = lambda **kw: [e for e in real(**kw) if e.name != 'onednn']\n")
    out = _run(prepare)
    assert "mxkit.onednn" not in out and "CPU KERNELS SERVED" in out


def test_the_onednn_hook_is_applied_after_mxkit_cpus():
    """pluggy lists tryfirst implementations last, whichever registered first, and the last one wins."""
    from mxkit.core.plugins import get_plugin_manager

    impls = [impl.plugin_name for impl in get_plugin_manager().hook.mxkit_kernels.get_hookimpls()]
    assert impls[-1] == "onednn" and "cpu" in impls, impls


OPENMP_CHECK = textwrap.dedent("""
    import ctypes, os, sys
    seen = []
    real_cdll = ctypes.CDLL
    names = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

    def recording_cdll(path, *args, **kwargs):
        seen.append([os.environ.get(n) for n in names])  # what libgomp reads when it loads with libdnnl
        return real_cdll(path, *args, **kwargs)

    ctypes.CDLL = recording_cdll
    import mxkit_onednn.library as library
    assert library.load() is not None, library.status()
    print("AT LOAD", seen[-1] if seen else "not loaded by path", "AFTER", [os.environ.get(n) for n in names])
""")


@pytest.mark.parametrize("preset, at_load", [
    ({}, ["ACTIVE", "30000"]),
    ({"OMP_WAIT_POLICY": "PASSIVE"}, ["PASSIVE", None]),
    ({"GOMP_SPINCOUNT": "0"}, [None, "0"]),
])
def test_onednn_loads_with_a_short_openmp_spin_unless_the_environment_says_otherwise(preset, at_load):
    """libgomp's threads spin long between regions by default, taking the cores the engine's other threads need,
    and with no spin every small primitive waits for its helper thread to wake: the library loads with a short
    spin (GOMP_SPINCOUNT=30000, OMP_WAIT_POLICY=ACTIVE: a longer spin where the threads outnumber the cores)
    where the environment sets neither variable, a user's setting of either wins,
    and the environment is left as it was (child processes see what the user set)."""
    from mxkit_onednn.library import load

    if load() is None:
        pytest.skip("oneDNN is not loadable here")
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(preset)
    result = subprocess.run([sys.executable, "-c", OPENMP_CHECK], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stdout.strip().splitlines()[-1]
    after = [preset.get("OMP_WAIT_POLICY"), preset.get("GOMP_SPINCOUNT")]
    assert line == f"AT LOAD {at_load} AFTER {after}", line
