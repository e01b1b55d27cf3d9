"""docs/architecture.md is the project's map: it names every hook, component and plugin there is."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"


def test_the_map_names_every_hook():
    from mxkit.core.hookspecs import HOOK_NAMES

    text = MAP.read_text()
    missing = [name for name in HOOK_NAMES if f"`{name}(" not in text]
    assert missing == [], f"docs/architecture.md's hook table lacks {missing}"


def test_the_map_lays_out_every_component_and_plugin():
    text = MAP.read_text()
    directories = [p for p in (*ROOT.glob("packages/*"), *ROOT.glob("plugins/*")) if (p / "pyproject.toml").exists()]
    missing = [f"{p.parent.name}/{p.name}" for p in directories if f"  {p.name}/" not in text]
    assert missing == [], f"docs/architecture.md's layout lacks {missing}"


def test_the_map_shows_the_import_contract_layers():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    text = MAP.read_text().replace("\n", " ")
    shown = " < ".join(layer.replace("mxkit.", "").replace("mx", "facade") for layer in reversed(layers))
    assert " ".join(shown.split()) in " ".join(text.split()), shown


def test_plugin_guide_example_is_the_real_plugin():
    guide = (ROOT / "docs" / "plugins.md").read_text()
    plugin = (ROOT / "tests/plugins/mxkit-recorder-plugin/src/mxkit_recorder_plugin/plugin.py").read_text()
    for name in ("recorder_apart", "recorder_immediate", 'device_type="recorder"'):
        assert name in guide and name in plugin
