"""Builds the oneDNN plugin's Cython layer against the headers and library of the PyPI wheels
``onednn-devel-cpu-gomp`` and ``onednn-cpu-gomp`` (build requirements, see pyproject.toml).

Those wheels install their files as data: ``<prefix>/include/oneapi/dnnl/dnnl.h`` and
``<prefix>/lib/libdnnl.so.3``, where ``<prefix>`` is the environment the build runs in.
The extension links against that library by its soname and carries an rpath to the ``lib``
directory of the environment it is installed into (``$ORIGIN/../../..`` from
``<prefix>/lib/pythonX.Y/site-packages/mxkit_onednn``); an editable install, whose
extension sits in the source tree, finds the library through
:mod:`mxkit_onednn.library`, which loads it by path before importing the extension.
``MXKIT_ONEDNN_ROOT`` names another prefix (a oneDNN built from source). Without the
headers the plugin is built without its extension and says so when loaded.
"""

import os
import sys
import sysconfig
import warnings
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
HEADER = Path("include") / "oneapi" / "dnnl" / "dnnl.h"


def onednn_prefix() -> Path | None:
    """The first prefix that holds oneDNN's header and library."""
    candidates = [os.environ.get("MXKIT_ONEDNN_ROOT"), sysconfig.get_path("data"), sys.prefix, sys.base_prefix]
    for candidate in candidates:
        if candidate and (Path(candidate) / HEADER).is_file() and any((Path(candidate) / "lib").glob("libdnnl.so*")):
            return Path(candidate)
    return None


def extensions():
    prefix = onednn_prefix()
    if prefix is None:
        warnings.warn("oneDNN's headers were not found (install onednn-devel-cpu-gomp or set MXKIT_ONEDNN_ROOT): "
                      "mxkit-onednn is built without its extension and mxkit-cpu's kernels will serve", stacklevel=1)
        return []
    import numpy
    from Cython.Build import cythonize

    module = Extension(
        "mxkit_onednn._dnnl", ["src/mxkit_onednn/_dnnl.pyx"],
        include_dirs=[numpy.get_include(), str(prefix / "include")],
        library_dirs=[str(prefix / "lib")],
        libraries=["dnnl"],
        extra_compile_args=["-O2"],
        extra_link_args=["-Wl,-rpath,$ORIGIN/../../.."],
    )
    return cythonize([module], language_level=3)


setup(ext_modules=extensions())
