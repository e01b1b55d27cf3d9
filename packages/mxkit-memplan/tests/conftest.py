"""Isolation for memplan tests: no MXKIT_* environment, an empty working directory, and
a plugin manager that holds the built-in planners but no third-party entry points."""

import os
import sys
from importlib import metadata

import pytest
from mxkit.core import plugins

# the shared helpers (memplan_testing.py) sit beside the tests; importlib mode does not add this folder
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def isolated_memplan(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("MXKIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    real_entry_points = metadata.entry_points

    def no_mxkit_entry_points(**params):
        return [] if params.get("group") == plugins.ENTRY_POINT_GROUP else real_entry_points(**params)

    monkeypatch.setattr(metadata, "entry_points", no_mxkit_entry_points)
    monkeypatch.setattr(plugins, "BUILTIN_PLUGIN_MODULES", (("mxkit.memplan.plugin", "mxkit-memplan"),))
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()
