"""Sphinx configuration: the docs are Markdown (MyST); `nox -s docs` builds them with -W."""

project = "mxkit"
author = "the mxkit developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "alabaster"
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing"]
