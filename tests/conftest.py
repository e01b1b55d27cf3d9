"""Cross-package tests run against the installed workspace, with a fresh plugin manager."""

import pytest


@pytest.fixture
def fresh_plugins():
    """Rebuild the plugin manager before and after the test."""
    from mxkit.core import plugins
    from mxkit.core.context import clear_backend_cache

    plugins.reset_plugin_manager()
    clear_backend_cache()
    yield plugins
    plugins.reset_plugin_manager()
    clear_backend_cache()
