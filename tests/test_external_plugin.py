"""An outside package (tests/plugins/mxkit-recorder-plugin) plugs into mxkit through its
entry point alone: a backend, a memory planner and a consistency model."""

import os
import subprocess
import sys
from importlib import metadata

import pytest
from mxkit.core import Context


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
