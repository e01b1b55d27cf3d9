"""The import contracts of the root pyproject.toml ([tool.importlinter]) hold: components depend
downwards (docs/architecture.md), plugins build on core and ndarray only, and no component imports
a plugin. import-linter reads every import statement, including those inside functions."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("importlinter", reason="import-linter is a dev dependency (uv sync)")


def test_the_import_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                            cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_imports_inside_functions_are_seen():
    # mxkit.io._batch_arrays imports mxkit.ndarray only inside a function (NDArray batches are
    # optional): the graph the contracts are checked on must hold that edge, or a lazy upward
    # import would slip through
    import grimp

    graph = grimp.build_graph("mxkit.io", "mxkit.ndarray", include_external_packages=False)
    assert "mxkit.ndarray" in graph.find_modules_directly_imported_by("mxkit.io._batch_arrays")
    source = (ROOT / "packages/mxkit-io/src/mxkit/io/_batch_arrays.py").read_text()
    assert "\nfrom mxkit.ndarray" not in source and "\nimport mxkit.ndarray" not in source


def test_an_upward_import_breaks_the_layers(tmp_path):
    # the contracts are not vacuous: a copy of the configuration with core placed above ndarray fails
    config = (ROOT / "pyproject.toml").read_text()
    flipped = config.replace('    "mxkit.ndarray",\n    "mxkit.engine | mxkit.memplan | mxkit.io",\n    "mxkit.core",',
                             '    "mxkit.core",\n    "mxkit.ndarray",\n    "mxkit.engine | mxkit.memplan | mxkit.io",')
    assert flipped != config
    (tmp_path / "pyproject.toml").write_text(flipped)
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports), "--config", str(tmp_path / "pyproject.toml"), "--no-cache",
                             "--contract", "layers"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode != 0 and "BROKEN" in result.stdout
