"""The docs build (docs/make_pictures.py, then Sphinx) writes only ignored files, and the
numbers the guide quotes come from the same run as its pictures."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _make_pictures():
    spec = importlib.util.spec_from_file_location("make_pictures", DOCS / "make_pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pictures_go_to_a_folder_git_ignores():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = _make_pictures().OUT
    assert out.parent == DOCS
    for name in ("memplan-resnet.png", "figures.json"):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(out / name)], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"{out / name} would be a tracked file: the docs build must not change those"


def test_every_quoted_number_and_picture_comes_from_make_pictures(tmp_path):
    pytest.importorskip("matplotlib")
    pictures = _make_pictures()
    pictures.memory_picture(tmp_path)
    guides = "\n".join(path.read_text() for path in DOCS.glob("*.md"))
    quoted = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", guides))
    assert quoted and quoted <= set(pictures.FIGURES), f"quoted but never computed: {quoted - set(pictures.FIGURES)}"
    assert re.fullmatch(r"\d+%", pictures.FIGURES["memplan_mxnet_above_bound"])
    images = set(re.findall(r"\]\(_generated/([^)]+)\)", guides))
    source = (DOCS / "make_pictures.py").read_text()
    assert images and all(f'"{name}"' in source for name in images)
    assert not re.search(r"\]\(_static/", guides), "pictures come from the build, not from tracked files"
