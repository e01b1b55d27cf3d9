"""Configuration layering and validation (DESIGN §3)."""

import pytest
from mxkit.core import config, hookimpl, plugins
from mxkit.core.errors import ConfigError, DuplicatePluginError
from mxkit.core.specs import OptionSpec


def test_defaults_have_default_source():
    cfg = config.get_config()
    assert cfg.engine == "threaded_per_device"
    assert cfg.source("engine") == "default"
    assert cfg.graph_passes == ("prune", "fuse")


def test_mxkit_toml_overrides_default(tmp_path):
    (tmp_path / "mxkit.toml").write_text('engine = "naive"\ncpu_workers = 3\n')
    cfg = config.get_config()
    assert (cfg.engine, cfg.cpu_workers) == ("naive", 3)
    assert "mxkit.toml" in cfg.source("engine")


def test_pyproject_tool_table_is_read_when_no_mxkit_toml(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.mxkit]\nmemplan = "greedy"\n')
    cfg = config.get_config()
    assert cfg.memplan == "greedy"
    assert "[tool.mxkit]" in cfg.source("memplan")


def test_mxkit_toml_wins_over_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.mxkit]\nmemplan = "greedy"\n')
    (tmp_path / "mxkit.toml").write_text('memplan = "inplace"\n')
    assert config.get("memplan") == "inplace"


def test_environment_wins_over_file(tmp_path, monkeypatch):
    (tmp_path / "mxkit.toml").write_text('engine = "naive"\n')
    monkeypatch.setenv("MXKIT_ENGINE", "Threaded ")
    value, source = config.resolve("engine")
    assert value == "threaded"  # plugin names are normalised
    assert source == "environment MXKIT_ENGINE"


def test_override_wins_over_environment_and_nests(monkeypatch):
    monkeypatch.setenv("MXKIT_ENGINE", "threaded")
    with config.override(engine="naive"):
        assert config.resolve("engine") == ("naive", "override()")
        with config.override(engine="threaded_per_device", cpu_workers=2):
            assert config.get("engine") == "threaded_per_device"
            assert config.get("cpu_workers") == 2
        assert config.get("engine") == "naive"
    assert config.get("engine") == "threaded"


def test_override_restores_after_an_exception():
    with pytest.raises(RuntimeError), config.override(engine="naive"):
        raise RuntimeError("boom")
    assert config.get("engine") == "threaded_per_device"


def test_explicit_argument_wins_over_everything(monkeypatch):
    monkeypatch.setenv("MXKIT_MEMPLAN", "greedy")
    with config.override(memplan="inplace"):
        assert config.resolve("memplan", "coshare") == ("coshare", "argument")
        assert config.get("memplan", None) == "inplace"


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("disable_plugin_autoload", "1", True),
        ("disable_plugin_autoload", "off", False),
        ("disable_plugin_autoload", "YES", True),
        ("cpu_workers", "4", 4),
        ("graph_passes", "Prune, fuse,mirror", ("prune", "fuse", "mirror")),
        ("graph_passes", "", ()),
    ],
)
def test_environment_strings_are_converted(monkeypatch, key, raw, expected):
    monkeypatch.setenv("MXKIT_" + key.upper(), raw)
    assert config.get(key) == expected


def test_bad_environment_value_names_key_value_source_and_type(monkeypatch):
    monkeypatch.setenv("MXKIT_CPU_WORKERS", "many")
    with pytest.raises(ConfigError) as info:
        config.get_config()
    message = str(info.value)
    assert "'cpu_workers'" in message and "'many'" in message and "MXKIT_CPU_WORKERS" in message
    assert "int" in message


def test_value_below_minimum_is_rejected(tmp_path):
    (tmp_path / "mxkit.toml").write_text("cpu_workers = -2\n")
    with pytest.raises(ConfigError, match=r"cpu_workers.*-2.*mxkit.toml.*>= 0"):
        config.get_config()


def test_bool_rejects_words_it_does_not_know(monkeypatch):
    monkeypatch.setenv("MXKIT_TRACE_PLUGINS", "maybe")
    with pytest.raises(ConfigError, match="trace_plugins"):
        config.get_config()


def test_wrong_toml_type_is_rejected(tmp_path):
    (tmp_path / "mxkit.toml").write_text("cpu_workers = 1.5\n")
    with pytest.raises(ConfigError, match="cpu_workers"):
        config.get_config()


def test_unknown_key_in_file_lists_known_keys(tmp_path):
    (tmp_path / "mxkit.toml").write_text('engin = "naive"\n')
    with pytest.raises(ConfigError) as info:
        config.get_config()
    assert "'engin'" in str(info.value) and "engine" in str(info.value)


def test_invalid_toml_is_a_config_error(tmp_path):
    (tmp_path / "mxkit.toml").write_text("engine = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.get_config()


def test_override_validates_eagerly():
    with pytest.raises(ConfigError, match="cpu_workers"), config.override(cpu_workers="x"):
        pass
    with pytest.raises(ConfigError, match="unknown config key"), config.override(nonsense=1):
        pass


def test_file_changes_are_seen(tmp_path):
    path = tmp_path / "mxkit.toml"
    path.write_text('engine = "naive"\n')
    assert config.get("engine") == "naive"
    path.write_text('engine = "threaded"\n# changed size so the mtime check cannot miss it\n')
    import os

    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert config.get("engine") == "threaded"


def test_choices_are_enforced_for_options_with_choices():
    option = OptionSpec("layout_test", "str", "nchw", "test", choices=("nchw", "nhwc"))
    assert option.convert("NHWC", "here") == "nhwc"
    with pytest.raises(ConfigError, match=r"choices: nchw, nhwc"):
        option.convert("ncw", "here")


class _DeclaresKeys:
    """A plugin declaring configuration keys through the hook, as a component does."""

    def __init__(self, *specs):
        self.specs = specs

    @hookimpl
    def mxkit_options(self):
        yield from self.specs


def test_a_plugin_declared_key_works_in_every_layer(tmp_path, monkeypatch):
    plugins.register_plugin(_DeclaresKeys(OptionSpec("widget_size", "int", 3, "doc", minimum=1)), name="widgets")
    assert config.get("widget_size") == 3
    assert config.owner("widget_size") == "widgets"
    (tmp_path / "mxkit.toml").write_text("widget_size = 5\n")
    assert config.resolve("widget_size") == (5, f"file {tmp_path / 'mxkit.toml'}")
    monkeypatch.setenv("MXKIT_WIDGET_SIZE", "7")
    assert config.get("widget_size") == 7
    with config.override(widget_size=9):
        assert config.get("widget_size") == 9
    monkeypatch.setenv("MXKIT_WIDGET_SIZE", "0")
    with pytest.raises(ConfigError, match=r"'widget_size' = '0' \(from environment MXKIT_WIDGET_SIZE\).*>= 1"):
        config.get_config()


def test_a_key_declared_twice_is_an_error_naming_both():
    plugins.register_plugin(_DeclaresKeys(OptionSpec("widget_size", "int", 3, "doc")), name="widgets")
    plugins.register_plugin(_DeclaresKeys(OptionSpec("widget_size", "int", 4, "doc")), name="gadgets")
    with pytest.raises(DuplicatePluginError, match=r"widget_size.*widgets.*gadgets"):
        config.get("engine")


def test_a_key_unknown_until_its_plugin_is_registered(tmp_path):
    (tmp_path / "mxkit.toml").write_text("widget_size = 5\n")
    with pytest.raises(ConfigError, match="unknown config key 'widget_size'"):
        config.get("engine")
    plugins.register_plugin(_DeclaresKeys(OptionSpec("widget_size", "int", 3, "doc")), name="widgets")
    assert config.get("widget_size") == 5


def test_misspelled_key_in_file_suggests_the_closest(tmp_path):
    (tmp_path / "mxkit.toml").write_text('memplna = "greedy"\n')
    with pytest.raises(ConfigError, match=r"unknown config key 'memplna' .*did you mean 'memplan'\?"):
        config.get_config()


def test_misspelled_environment_variable_suggests_the_closest(monkeypatch):
    monkeypatch.setenv("MXKIT_ENGNE", "naive")
    with pytest.raises(ConfigError, match=r"^MXKIT_ENGNE: did you mean MXKIT_ENGINE\?"):
        config.get("engine")
    monkeypatch.delenv("MXKIT_ENGNE")
    assert config.get("engine") == "threaded_per_device"


def test_unrelated_mxkit_variable_is_an_error_listing_the_known_ones(monkeypatch):
    monkeypatch.setenv("MXKIT_ZZZ_QQQ", "1")
    with pytest.raises(ConfigError, match=r"MXKIT_ZZZ_QQQ: it is not a configuration key.*MXKIT_ENGINE"):
        config.get_config()


@pytest.mark.parametrize("name", sorted(config.NON_CONFIG_VARIABLES))
def test_non_config_variables_are_left_alone(monkeypatch, name):
    monkeypatch.setenv(name, "anything")
    assert config.get("engine") == "threaded_per_device"


def test_misspelled_override_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"unknown config key 'cpu_worker' \(from override\(\)\); "
                                          r"did you mean 'cpu_workers'\?"), config.override(cpu_worker=2):
        pass
