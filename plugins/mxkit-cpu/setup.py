"""Builds the CPU plugin's Cython kernels (every ``.pyx`` under src/mxkit_cpu)."""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

# Python's own CFLAGS carry -g: the wheels would ship several MB of debug information that
# nobody reads; -g0 (last flag wins) and a stripped link keep the shared objects small.
NO_DEBUG_INFO = ("-g0",)
STRIP = ["-s"] if sys.platform.startswith("linux") else []

HERE = Path(__file__).parent
SOURCES = sorted((HERE / "src" / "mxkit_cpu").glob("*.pyx"))
# _fastmath's and _elementwise's loops select between branch-free results; the compiler turns
# such selects into SIMD code only when it may assume that floating-point operations do not trap
# (relu on random signs otherwise branches, at twice the time). _update's Adam loop vectorizes
# its sqrt only when sqrt need not set errno
EXTRA_FLAGS = {"_fastmath": ("-fno-trapping-math",), "_elementwise": ("-fno-trapping-math",),
               "_update": ("-fno-trapping-math", "-fno-math-errno")}


def extensions():
    if not SOURCES:
        return []
    import numpy
    from Cython.Build import cythonize

    modules = [
        Extension("mxkit_cpu." + source.stem, [str(source.relative_to(HERE))],
                  include_dirs=[numpy.get_include()],
                  extra_compile_args=["-O3", *EXTRA_FLAGS.get(source.stem, ()), *NO_DEBUG_INFO],
                  extra_link_args=STRIP)
        for source in SOURCES
    ]
    return cythonize(modules, language_level=3)


# the extensions compile in parallel, one per core (each is a large generated C/C++ file)
setup(ext_modules=extensions(), options={"build_ext": {"parallel": os.cpu_count() or 1}})
