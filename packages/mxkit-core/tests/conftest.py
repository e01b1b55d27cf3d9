"""Isolation for core tests: a fresh plugin manager, no MXKIT_* environment, empty cwd."""

import os
from importlib import metadata

import pytest
from mxkit.core import plugins
from mxkit.core.context import clear_backend_cache


@pytest.fixture(autouse=True)
def isolated_core(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("MXKIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    # Hermetic: the installed entry points (other mxkit packages, example plugins) are
    # hidden, and so are the built-in component plugins; tests that need them fake them.
    real_entry_points = metadata.entry_points

    def no_mxkit_entry_points(**params):
        return [] if params.get("group") == plugins.ENTRY_POINT_GROUP else real_entry_points(**params)

    monkeypatch.setattr(metadata, "entry_points", no_mxkit_entry_points)
    monkeypatch.setattr(plugins, "BUILTIN_PLUGIN_MODULES", ())
    plugins.reset_plugin_manager()
    clear_backend_cache()
    yield
    plugins.reset_plugin_manager()
    clear_backend_cache()
