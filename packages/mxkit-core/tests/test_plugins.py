"""The plugin manager and registries: loading, isolation, duplicates, unknown names."""

import subprocess
import sys
import warnings
from importlib import metadata
from types import SimpleNamespace

import pytest
from mxkit.core import config, hookimpl, plugins
from mxkit.core.errors import ConfigError, DuplicatePluginError, PluginError, UnknownPluginError
from mxkit.core.specs import BackendSpec, ConsistencySpec, EngineSpec, PlannerSpec


def _engine_plugin(*names):
    @hookimpl
    def mxkit_engines():
        for name in names:
            yield EngineSpec(name=name, factory=lambda **options: ("engine", options))

    return SimpleNamespace(mxkit_engines=mxkit_engines)


def _planner_plugin(name):
    @hookimpl
    def mxkit_memory_planners():
        yield PlannerSpec(name=name, planner=lambda graph, **options: graph)

    return SimpleNamespace(mxkit_memory_planners=mxkit_memory_planners)


def _fake_entry_points(monkeypatch, *fake):
    """Make the ``mxkit`` entry-point group hold exactly ``fake``."""
    real = metadata.entry_points

    def entry_points(**params):
        if params.get("group") == plugins.ENTRY_POINT_GROUP:
            return list(fake)
        return real(**params)

    monkeypatch.setattr(metadata, "entry_points", entry_points)


def test_importing_core_builds_no_manager_and_imports_no_pluggy():
    code = "import sys, mxkit.core; print('pluggy' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_manager_is_cached_and_rebuildable():
    first = plugins.get_plugin_manager()
    assert plugins.get_plugin_manager() is first
    plugins.reset_plugin_manager()
    assert plugins.get_plugin_manager() is not first


def test_registered_plugin_specs_resolve_by_normalised_name():
    plugins.register_plugin(_engine_plugin(" Serial "), name="serial-plugin")
    spec = plugins.get_engine_spec("SERIAL")
    assert spec.name == "serial"
    assert spec.factory(workers=2) == ("engine", {"workers": 2})


def test_engine_from_config_and_source_in_unknown_error(monkeypatch):
    plugins.register_plugin(_engine_plugin("serial"), name="serial-plugin")
    monkeypatch.setenv("MXKIT_ENGINE", "serial")
    assert plugins.get_engine_spec().name == "serial"
    monkeypatch.setenv("MXKIT_ENGINE", "serail")
    with pytest.raises(UnknownPluginError) as info:
        plugins.get_engine_spec()
    message = str(info.value)
    assert "'serail'" in message and "available: serial" in message
    assert "MXKIT_ENGINE" in message and "pip install mxkit-engine" in message


def test_unknown_name_lists_all_choices():
    plugins.register_plugin(_engine_plugin("alpha", "beta"), name="two")
    with pytest.raises(UnknownPluginError, match=r"available: alpha, beta"):
        plugins.get_engine_spec("gamma")
    with pytest.raises(LookupError):  # also a LookupError for generic handlers
        plugins.get_engine_spec("gamma")


def test_duplicate_name_names_both_plugins_and_leaves_others_working():
    plugins.register_plugin(_engine_plugin("shared", "only-a"), name="plugin-a")
    plugins.register_plugin(_engine_plugin("shared", "only-b"), name="plugin-b")
    with pytest.raises(DuplicatePluginError) as info:
        plugins.get_engine_spec("shared")
    assert "plugin-a" in str(info.value) and "plugin-b" in str(info.value)
    assert plugins.get_engine_spec("only-a").name == "only-a"
    assert plugins.get_engine_spec("only-b").name == "only-b"
    assert set(plugins.registry("engine").conflicts()) == {"shared"}


def test_duplicate_from_distributions_names_the_distributions():
    from mxkit.core.specs import PluginInfo

    plugins.register_plugin(_engine_plugin("same"), name="p1")
    plugins.register_plugin(_engine_plugin("same"), name="p2")
    plugins._plugin_info["p1"] = PluginInfo("p1", "dist-one", "1.0")
    plugins._plugin_info["p2"] = PluginInfo("p2", "dist-two", "2.0")
    with pytest.raises(DuplicatePluginError, match=r"dist-one 1.0.*dist-two 2.0"):
        plugins.get_engine_spec("same")


def test_backend_aliases_resolve_and_conflict():
    def factory(device_id):
        return ("backend", device_id)

    @hookimpl
    def mxkit_backends():
        yield BackendSpec(name="cl", device_type="OpenCL", aliases=("cl",), factory=factory)

    plugins.register_plugin(SimpleNamespace(mxkit_backends=mxkit_backends), name="opencl-plugin")
    assert plugins.get_backend("opencl").name == "cl"
    assert plugins.get_backend("CL").name == "cl"


def test_entry_point_plugin_loads(monkeypatch):
    module = SimpleNamespace(mxkit_engines=_engine_plugin("from-entry-point").mxkit_engines)
    sys.modules["mxkit_test_fake_plugin"] = module  # type: ignore[assignment]
    try:
        _fake_entry_points(monkeypatch, metadata.EntryPoint("fake", "mxkit_test_fake_plugin", "mxkit"))
        assert plugins.get_engine_spec("from-entry-point").name == "from-entry-point"
        assert any(p.plugin == "fake" for p in plugins.list_plugins())
    finally:
        del sys.modules["mxkit_test_fake_plugin"]


def test_plugin_whose_import_raises_is_a_warning_and_the_rest_works(monkeypatch):
    sys.modules["mxkit_test_good_plugin"] = _engine_plugin("good")  # type: ignore[assignment]
    try:
        _fake_entry_points(
            monkeypatch,
            metadata.EntryPoint("broken", "mxkit_test_module_that_does_not_exist", "mxkit"),
            metadata.EntryPoint("good", "mxkit_test_good_plugin", "mxkit"),
        )
        with pytest.warns(plugins.PluginLoadWarning, match=r"broken.*failed to load"):
            plugins.get_plugin_manager()
        assert plugins.get_engine_spec("good").name == "good"
        assert all(p.plugin != "broken" for p in plugins.list_plugins())
    finally:
        del sys.modules["mxkit_test_good_plugin"]


def test_autoload_disabled_skips_entry_points(monkeypatch):
    sys.modules["mxkit_test_good_plugin"] = _engine_plugin("good")  # type: ignore[assignment]
    try:
        _fake_entry_points(monkeypatch, metadata.EntryPoint("good", "mxkit_test_good_plugin", "mxkit"))
        monkeypatch.setenv("MXKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
        with pytest.raises(UnknownPluginError):
            plugins.get_engine_spec("good")
        monkeypatch.delenv("MXKIT_DISABLE_PLUGIN_AUTOLOAD")
        plugins.reset_plugin_manager()
        assert plugins.get_engine_spec("good").name == "good"
    finally:
        del sys.modules["mxkit_test_good_plugin"]


class _Distribution:
    def __init__(self, name):
        self.name, self.version = name, "9.9"


def _entry_point_of(distribution, name, module):
    """An entry point as an installed distribution ``distribution`` would declare it."""
    return metadata.EntryPoint(name, module, "mxkit")._for(_Distribution(distribution))


def test_autoload_disabled_keeps_first_party_plugins_and_loads_the_named_ones(monkeypatch):
    sys.modules["mxkit_test_first_party"] = _engine_plugin("ours")  # type: ignore[assignment]
    sys.modules["mxkit_test_outside_a"] = _engine_plugin("outside_a")  # type: ignore[assignment]
    sys.modules["mxkit_test_outside_b"] = _engine_plugin("outside_b")  # type: ignore[assignment]
    try:
        _fake_entry_points(
            monkeypatch,
            _entry_point_of("mxkit_cpu", "ours", "mxkit_test_first_party"),  # spelled as a wheel spells it
            _entry_point_of("someone-elses", "outside_a", "mxkit_test_outside_a"),
            _entry_point_of("someone-elses", "outside_b", "mxkit_test_outside_b"),
        )
        monkeypatch.setenv("MXKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
        assert plugins.get_engine_spec("ours").name == "ours"
        with pytest.raises(UnknownPluginError, match="outside_a"):
            plugins.get_engine_spec("outside_a")
        monkeypatch.setenv("MXKIT_PLUGINS", "Outside_B")
        plugins.reset_plugin_manager()
        assert plugins.get_engine_spec("outside_b").name == "outside_b"
        assert plugins.get_engine_spec("ours").name == "ours"
        with pytest.raises(UnknownPluginError):
            plugins.get_engine_spec("outside_a")
        loaded = {p.plugin: p.distribution for p in plugins.list_plugins()}
        assert loaded["outside_b"] == "someone-elses" and "outside_a" not in loaded
    finally:
        for name in ("mxkit_test_first_party", "mxkit_test_outside_a", "mxkit_test_outside_b"):
            del sys.modules[name]


def test_plugins_key_naming_no_installed_plugin_is_an_error(monkeypatch):
    _fake_entry_points(monkeypatch, _entry_point_of("someone-elses", "present", "mxkit_test_absent_module"))
    monkeypatch.setenv("MXKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("MXKIT_PLUGINS", "recordr")
    with pytest.raises(ConfigError, match=r"'plugins' \(from environment MXKIT_PLUGINS\) names 'recordr'.*"
                                          r"installed: present"):
        plugins.get_plugin_manager()


def test_misspelt_hook_fails_loudly_when_registered_by_hand():
    @hookimpl
    def mxkit_engine():  # missing "s"
        return []

    with pytest.raises(PluginError, match=r"mxkit_engine.*mxkit_engines"):
        plugins.register_plugin(SimpleNamespace(mxkit_engine=mxkit_engine), name="typo")
    assert not plugins.get_plugin_manager().has_plugin("typo")


def test_misspelt_hook_in_entry_point_is_skipped_with_warning(monkeypatch):
    @hookimpl
    def mxkit_planners():
        return []

    sys.modules["mxkit_test_typo_plugin"] = SimpleNamespace(mxkit_planners=mxkit_planners)  # type: ignore[assignment]
    try:
        _fake_entry_points(monkeypatch, metadata.EntryPoint("typo", "mxkit_test_typo_plugin", "mxkit"))
        with pytest.warns(plugins.PluginLoadWarning, match="mxkit_planners"):
            plugins.get_plugin_manager()
        plugins.check_pending()  # nothing pending is left behind
    finally:
        del sys.modules["mxkit_test_typo_plugin"]


def test_hook_that_raises_is_skipped_with_warning():
    @hookimpl
    def mxkit_memory_planners():
        raise RuntimeError("planner plugin bug")

    plugins.register_plugin(SimpleNamespace(mxkit_memory_planners=mxkit_memory_planners), name="buggy")
    plugins.register_plugin(_planner_plugin("fine"), name="fine-plugin")
    with pytest.warns(plugins.PluginLoadWarning, match="planner plugin bug"):
        names = plugins.registry("planner").names()
    assert "fine" in names


def test_wrong_spec_type_is_skipped_with_warning():
    @hookimpl
    def mxkit_consistency_models():
        yield EngineSpec(name="wrong", factory=dict)
        yield ConsistencySpec(name="right", model=object)

    plugins.register_plugin(SimpleNamespace(mxkit_consistency_models=mxkit_consistency_models), name="mixed")
    with pytest.warns(plugins.PluginLoadWarning, match="expected a ConsistencySpec"):
        assert plugins.registry("consistency").names() == ["right"]


def test_trace_plugins_logs_hook_calls(monkeypatch, capfd):
    monkeypatch.setenv("MXKIT_TRACE_PLUGINS", "1")
    plugins.register_plugin(_engine_plugin("traced"), name="traced-plugin")
    plugins.get_plugin_manager().hook.mxkit_engines()
    assert "mxkit_engines" in capfd.readouterr().err


def test_unknown_kind_lists_kinds():
    with pytest.raises(UnknownPluginError, match="backend, engine, planner"):
        plugins.registry("widget")


def test_unregister_plugin_forgets_its_specs():
    plugins.register_plugin(_engine_plugin("temporary"), name="temp")
    assert plugins.get_engine_spec("temporary")
    plugins.unregister_plugin("temp")
    with pytest.raises(UnknownPluginError):
        plugins.get_engine_spec("temporary")


def test_spec_validation():
    assert EngineSpec(name="  MiXed ", factory=dict).name == "mixed"
    with pytest.raises(PluginError, match="non-empty string"):
        EngineSpec(name="  ", factory=dict)
    with pytest.raises(PluginError, match="callable factory"):
        EngineSpec(name="x", factory=None)
    with pytest.raises(PluginError, match="callable factory"):
        BackendSpec(name="x", device_type="x", factory="not callable")  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="needs a model"):
        ConsistencySpec(name="x")


def test_config_key_from_override_is_used_for_lookup():
    plugins.register_plugin(_engine_plugin("one", "two"), name="p")
    with config.override(engine="two"):
        assert plugins.get_engine_spec().name == "two"


def test_info_renders_plugins_and_config_with_sources(monkeypatch):
    from mxkit.core.info import render_info

    plugins.register_plugin(_engine_plugin("shown"), name="shown-plugin")
    monkeypatch.setenv("MXKIT_CPU_WORKERS", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = render_info()
    assert "shown-plugin" in text and "shown" in text
    assert "environment MXKIT_CPU_WORKERS" in text
    assert "engines:" in text and "configuration" in text


def _workers_plugin(answer):
    @hookimpl
    def mxkit_cpu_workers():
        return answer

    return SimpleNamespace(mxkit_cpu_workers=mxkit_cpu_workers)


def test_the_fewest_cpu_workers_a_plugin_asks_for_wins():
    base = plugins.preferred_cpu_workers()  # what the installed plugins ask (mxkit-onednn: 1, or None)
    plugins.register_plugin(_workers_plugin(None), name="no-preference")
    assert plugins.preferred_cpu_workers() == base
    plugins.register_plugin(_workers_plugin(3), name="three")
    assert plugins.preferred_cpu_workers() == (3 if base is None else min(base, 3))
    plugins.register_plugin(_workers_plugin(1), name="one")
    assert plugins.preferred_cpu_workers() == 1


@pytest.mark.parametrize("answer", [0, -1, 1.5, "2", True])
def test_a_bad_cpu_workers_answer_names_the_hook(answer):
    plugins.register_plugin(_workers_plugin(answer), name="bad-workers")
    with pytest.raises(PluginError, match=r"mxkit_cpu_workers hook answered .*int >= 1 or None"):
        plugins.preferred_cpu_workers()
