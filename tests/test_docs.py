"""docs/architecture.md is the design map; it must agree with the shared DESIGN.md."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DESIGN = ROOT.parent / "shared" / "DESIGN.md"


@pytest.mark.skipif(not SHARED_DESIGN.exists(), reason="the shared design map is not beside this checkout")
def test_architecture_doc_matches_the_design_map():
    assert (ROOT / "docs" / "architecture.md").read_text() == SHARED_DESIGN.read_text(), (
        "docs/architecture.md and the shared DESIGN.md differ: update one from the other"
    )


def test_plugin_guide_example_is_the_real_plugin():
    guide = (ROOT / "docs" / "plugins.md").read_text()
    plugin = (ROOT / "tests/plugins/mxkit-recorder-plugin/src/mxkit_recorder_plugin/plugin.py").read_text()
    for name in ("recorder_apart", "recorder_immediate", 'device_type="recorder"'):
        assert name in guide and name in plugin
