"""Sphinx configuration: the docs are Markdown (MyST); `nox -s docs` builds them with -W.

The pictures and the numbers the prose quotes come from docs/make_pictures.py, which writes
them to docs/_generated (ignored by git) just before the build.
"""

import json
from pathlib import Path

_FIGURES = Path(__file__).parent / "_generated" / "figures.json"
if not _FIGURES.exists():
    raise SystemExit(f"{_FIGURES} is missing: run `python docs/make_pictures.py` first (nox -s docs does)")

project = "mxkit"
author = "the mxkit developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_generated"]
html_theme = "alabaster"
myst_heading_anchors = 3
myst_enable_extensions = ["substitution"]
myst_substitutions = json.loads(_FIGURES.read_text())
suppress_warnings = ["myst.xref_missing"]
