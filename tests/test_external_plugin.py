"""An outside package (tests/plugins/mxkit-recorder-plugin) plugs into mxkit through its
entry point alone: a backend that holds and computes arrays, a kernel override, a memory
planner and a consistency model, using only the published interfaces."""

import os
import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest
from mxkit.core import Context, cpu


def test_recorder_plugin_is_installed_through_an_entry_point():
    names = {ep.name: ep.value for ep in metadata.entry_points(group="mxkit")}
    assert names.get("recorder") == "mxkit_recorder_plugin.plugin"


def test_recorder_backend_planner_and_consistency_resolve(fresh_plugins):
    from mxkit_recorder_plugin import plugin

    plugin.CALLS.clear()
    backend = Context("recorder", 3).backend
    assert backend.device_id == 3 and ("backend", 3) in plugin.CALLS
    assert fresh_plugins.get_planner("recorder_apart").planner is plugin.plan_apart
    model = fresh_plugins.get_consistency_model("recorder_immediate").model(num_workers=4)
    assert model.ready_to_apply(1) and ("consistency", 4) in plugin.CALLS
    origin = {p.plugin: p for p in fresh_plugins.list_plugins()}["recorder"]
    assert origin.distribution == "mxkit-recorder-plugin"


def test_autoload_off_hides_the_outside_plugin_and_keeps_our_own(fresh_plugins, monkeypatch):
    from mxkit.core.errors import DeviceError

    monkeypatch.setenv("MXKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
    fresh_plugins.reset_plugin_manager()
    with pytest.raises(DeviceError, match="recorder"):
        _ = Context("recorder", 0).backend
    assert fresh_plugins.get_backend("cpu").name == "numpy"  # mxkit-cpu is ours: it stays
    assert "recorder" not in {p.plugin for p in fresh_plugins.list_plugins()}


def test_autoload_off_loads_the_plugins_the_config_names(fresh_plugins, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mxkit.toml").write_text('disable_plugin_autoload = true\nplugins = ["recorder"]\n')
    fresh_plugins.reset_plugin_manager()
    assert Context("recorder", 1).backend.device_id == 1
    assert fresh_plugins.get_planner("recorder_apart").name == "recorder_apart"


def test_a_fresh_process_with_autoload_off_computes_on_the_cpu():
    code = "from mxkit import mx; assert (mx.nd.ones((2,)) * 3).asnumpy().tolist() == [3.0, 3.0]"
    env = {**os.environ, "MXKIT_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_mxkit_info_lists_it_with_its_distribution():
    out = subprocess.run([sys.executable, "-m", "mxkit.mx", "info"], capture_output=True, text=True, check=True)
    assert "mxkit-recorder-plugin" in out.stdout
    assert "recorder_apart" in out.stdout and "recorder_immediate" in out.stdout


def test_recorder_device_holds_computes_and_copies_arrays(fresh_plugins):
    """Arrays live on the outside backend's device: created there, computed on by the generic
    kernels, and copied to and from the host through its from_host / to_host."""
    import mxkit.ndarray as nd
    from mxkit_recorder_plugin.backend import TRANSFERS

    rec = Context("recorder", 0)
    TRANSFERS.clear()
    a = nd.ones((2, 3), ctx=rec)
    b = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3), ctx=rec)
    c = (a * 2 + b).sum(axis=1)
    assert c.context == rec
    np.testing.assert_array_equal(c.asnumpy(), [2 * 3 + 3, 2 * 3 + 12])
    assert ("from_host", (2, 3)) in TRANSFERS and ("to_host", (2,)) in TRANSFERS
    on_cpu = b.copyto(cpu(0))
    back = on_cpu.as_in_context(rec)
    np.testing.assert_array_equal(back.asnumpy(), b.asnumpy())
    assert back.context == rec and on_cpu.context == cpu(0)


def test_recorder_kernel_override_is_the_one_that_runs(fresh_plugins):
    import mxkit.ndarray as nd
    from mxkit.ndarray.registry import reload_kernels
    from mxkit_recorder_plugin.kernels import RELU_CALLS, relu

    reload_kernels()
    assert nd.get_op("relu").kernels["recorder"] is relu
    RELU_CALLS.clear()
    x = nd.array(np.array([[-1.5, 2.0, 0.0]], np.float32), ctx=Context("recorder", 1))
    np.testing.assert_array_equal(nd.relu(x).asnumpy(), [[0.0, 2.0, 0.0]])
    assert RELU_CALLS == [(1, 3)]
    nd.relu(nd.array(np.array([-1.0, 1.0], np.float32))).wait_to_read()  # on cpu: not the override
    assert RELU_CALLS == [(1, 3)]


def test_recorder_backend_fills_in_the_published_defaults(fresh_plugins):
    from mxkit.ndarray.backend import Backend
    from mxkit.ndarray.invoke import backend_of

    backend = backend_of(Context("recorder", 2))
    assert isinstance(backend, Backend) and backend.device_id == 2
    np.testing.assert_array_equal(backend.zeros((2,), np.float32), [0, 0])
    assert backend.bind_to_device(len) is len and backend.memory_stats() == {}
