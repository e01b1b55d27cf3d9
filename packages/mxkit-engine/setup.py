"""Builds the engine's Cython extensions (every ``.pyx`` under src/mxkit/engine, as C++)."""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
SOURCES = sorted((HERE / "src" / "mxkit" / "engine").glob("*.pyx"))


def extensions():
    if not SOURCES:
        return []
    from Cython.Build import cythonize

    modules = [
        Extension(
            "mxkit.engine." + source.stem,
            [str(source.relative_to(HERE))],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
        )
        for source in SOURCES
    ]
    return cythonize(modules, language_level=3, compiler_directives={"binding": False})


setup(ext_modules=extensions())
