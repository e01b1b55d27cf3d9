"""Shared fixtures of the mxkit-io tests: the MXNet-written files and numpy batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mxkit_io_test_helpers import FIXTURES


@pytest.fixture(autouse=True)
def numpy_batches(monkeypatch):
    """Iterators hand out numpy arrays in these tests (the mxkit-io-alone path)."""
    monkeypatch.setenv("MXKIT_IO_BATCH_TYPE", "numpy")


@pytest.fixture(scope="session")
def mxnet_results():
    """Batches that MXNet 1.9.1's iterators produced on the fixture files."""
    return json.loads((FIXTURES / "mxnet_iterators.json").read_text())


@pytest.fixture(scope="session")
def mxnet_image_batches():
    """Pixels of MXNet 1.9.1's ImageRecordIter batches (see make_mxnet_fixtures.py)."""
    with np.load(FIXTURES / "mxnet_imageiter.npz") as arrays:
        return dict(arrays)
