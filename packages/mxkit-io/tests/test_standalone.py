"""mxkit-io needs only mxkit-core and numpy: heavy and optional modules load on use."""

from __future__ import annotations

import builtins
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mxkit.core.errors import MissingComponentError
from mxkit.io import recordio


def test_import_loads_no_optional_component():
    code = (
        "import sys, mxkit.io, mxkit.io.recordio, mxkit.io.verify, mxkit.io.im2rec\n"
        "loaded = [m for m in ('cv2', 'fsspec', 'mxkit.ndarray', 'mxkit.engine') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_namespace_init_file():
    source = Path(__file__).resolve().parents[1] / "src" / "mxkit"
    assert not (source / "__init__.py").exists()


def test_missing_opencv_is_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def no_cv2(name, *args, **kwargs):
        if name == "cv2":
            raise ModuleNotFoundError("No module named 'cv2'", name="cv2")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cv2)
    with pytest.raises(MissingComponentError, match=r"pip install 'mxkit\[image\]'.*'mxkit-io\[image\]'"):
        recordio.pack_img(recordio.IRHeader(0, 0, 0, 0), np.zeros((2, 2, 3), np.uint8))
