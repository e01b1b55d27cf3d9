"""Helpers shared by the mxkit-io tests (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def _load_generators():
    spec = importlib.util.spec_from_file_location("mxnet_fixture_generators", FIXTURES / "make_mxnet_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


generators = _load_generators()


def read_all(reader):
    """Every remaining record of a reader."""
    records = []
    while (record := reader.read()) is not None:
        records.append(record)
    return records
