"""The oneDNN plugin's tests share onednn_harness (tests run with --import-mode=importlib)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def onednn_only():
    """oneDNN's program alone (not the fastest of it and the replaced kernel)."""
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    PROGRAMS.only = "plain"
    yield
    PROGRAMS.only = None
    PROGRAMS.clear()
