"""Builds the CPU plugin's Cython kernels (every ``.pyx`` under src/mxkit_cpu)."""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
SOURCES = sorted((HERE / "src" / "mxkit_cpu").glob("*.pyx"))


def extensions():
    if not SOURCES:
        return []
    import numpy
    from Cython.Build import cythonize

    modules = [
        Extension("mxkit_cpu." + source.stem, [str(source.relative_to(HERE))],
                  include_dirs=[numpy.get_include()], extra_compile_args=["-O3"])
        for source in SOURCES
    ]
    return cythonize(modules, language_level=3)


setup(ext_modules=extensions())
