"""Shared fixtures of the mxkit-symbol tests."""

import os
import sys

import pytest
from mxkit.ndarray.registry import get_registry

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _training_step (importlib import mode)


def _require_ops(*names: str) -> None:
    missing = [n for n in names if n not in get_registry()]
    if missing:
        pytest.skip(f"operators not registered yet: {', '.join(missing)}")


@pytest.fixture
def require_ops():
    """``require_ops("FullyConnected", ...)`` skips the test unless those operators are registered."""
    return _require_ops


@pytest.fixture
def fixture_path():
    """``fixture_path(name)``: a file of tests/fixtures."""
    return lambda name: os.path.join(FIXTURES, name)


@pytest.fixture
def naive_engine():
    """Run on the naive engine (inline pushes) for the test, then restore the process engine."""
    import mxkit.engine as engine

    previous = engine.set_engine("naive")
    yield engine.get()
    if previous is not None:
        engine.set_engine(previous)
    else:
        engine.reset()


@pytest.fixture(autouse=True)
def only_implemented_passes():
    """Run the executor tests node by node: without fusion (the default config fuses, which would
    merge the nodes some tests look at); the fusion and mirror tests choose their passes."""
    from mxkit.core import config

    with config.override(graph_passes=["prune"]):
        yield
