"""The compiled extensions are built lean: no debug information and no symbol table (what a
wheel ships is what the build made; -g0 and a stripped link in each setup.py)."""

from __future__ import annotations

import importlib
import struct
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF shared objects on Linux only")


def _section_names(path: Path) -> set[str]:
    """The section names of a 64-bit little-endian ELF file (its section header string table)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit LE ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_offset, names_size = sections[shstrndx][4], sections[shstrndx][5]
    names = data[names_offset:names_offset + names_size]
    return {names[s[0]:names.index(b"\0", s[0])].decode() for s in sections}


@pytest.mark.parametrize("package", ["mxkit_cpu", "mxkit.engine"])
def test_extensions_carry_no_debug_information_or_symbol_table(package):
    module = importlib.import_module(package)
    objects = sorted(Path(next(iter(module.__path__))).glob("*.so"))
    assert objects, f"{package} has no compiled extension"
    for path in objects:
        names = _section_names(path)
        assert not {n for n in names if n.startswith(".debug")}, f"{path.name} carries debug information"
        assert ".symtab" not in names, f"{path.name} is not stripped"
