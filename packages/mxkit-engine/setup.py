"""Builds the engine's Cython extensions (every ``.pyx`` under src/mxkit/engine, as C++)."""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

# Python's own CFLAGS carry -g: the wheels would ship several MB of debug information that
# nobody reads; -g0 (last flag wins) and a stripped link keep the shared objects small.
NO_DEBUG_INFO = ("-g0",)
STRIP = ["-s"] if sys.platform.startswith("linux") else []

HERE = Path(__file__).parent
SOURCE_ROOT = HERE / "src"
ENGINE_DIR = SOURCE_ROOT / "mxkit" / "engine"
SOURCES = sorted(ENGINE_DIR.glob("*.pyx"))


def extensions():
    if not SOURCES:
        return []
    from Cython.Build import cythonize

    modules = [
        Extension(
            "mxkit.engine." + source.stem,
            [str(source.relative_to(HERE))],
            language="c++",
            include_dirs=[str(ENGINE_DIR.relative_to(HERE))],
            extra_compile_args=["-O2", "-std=c++17", *NO_DEBUG_INFO],
            extra_link_args=STRIP,
        )
        for source in SOURCES
    ]
    # `mxkit` is a namespace package (no __init__.py), so Cython finds the .pxd files
    # that belong to "mxkit.engine.X" only through the source root on its include path.
    return cythonize(modules, language_level=3, include_path=[str(SOURCE_ROOT)],
                     compiler_directives={"binding": False})


# the extensions compile in parallel, one per core (each is a large generated C/C++ file)
setup(ext_modules=extensions(), options={"build_ext": {"parallel": os.cpu_count() or 1}})
