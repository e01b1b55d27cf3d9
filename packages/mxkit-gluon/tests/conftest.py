import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gluon_testing_nets (importlib import mode)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_path():
    return lambda name: str(FIXTURES / name)


@pytest.fixture
def fresh_names():
    """A fresh symbol name manager, so top-level blocks are numbered from 0 as in a new MXNet process."""
    from mxkit.symbol.name import NameManager

    with NameManager():
        yield
