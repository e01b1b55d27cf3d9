"""Installing a part of mxkit, as the user guide's "Installing parts" says: wheels built from this
repository, a subset of them installed into a fresh virtual environment, and that subset working
without the components it did not ask for.

The wheels are built and installed with uv (a development dependency) in offline mode: the
third-party dependencies (numpy, pluggy) come from uv's cache, which setting up this repository
filled, so the test needs no network.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

uv = pytest.importorskip("uv", reason="uv builds the wheels (a development dependency)")

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _uv(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [uv.find_uv_bin(), *args], cwd=cwd, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, f"uv {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def io_only_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh venv holding mxkit-io and what it needs (mxkit-core), from wheels built here."""
    work = tmp_path_factory.mktemp("parts")
    wheels = work / "wheels"
    for part in ("mxkit-core", "mxkit-io"):
        _uv("build", "--offline", "--wheel", "--quiet", "--out-dir", str(wheels),
            str(REPO / "packages" / part), cwd=work)
    venv = work / "venv"
    _uv("venv", "--offline", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    python = venv / "bin" / "python"
    # the same command the user guide gives, with uv's cache standing in for PyPI
    _uv("pip", "install", "--offline", "--quiet", "--python", str(python),
        "--find-links", str(wheels), "mxkit-io", cwd=work)
    return python, wheels


def test_the_io_component_installs_and_runs_without_the_others(io_only_env, tmp_path):
    python, _ = io_only_env
    script = textwrap.dedent("""
        import importlib.util, sys
        from mxkit.io import recordio
        # the parts that were not asked for are not there, and io did not need them
        absent = [m for m in ("mxkit.engine", "mxkit.ndarray", "mxkit.symbol", "mxkit.train")
                  if importlib.util.find_spec(m) is not None]
        assert not absent, absent
        path = sys.argv[1]
        with recordio.MXIndexedRecordIO(path + ".idx", path + ".rec", "w") as w:
            for i in range(5):
                w.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i), i, 0), b"x" * i))
        r = recordio.MXIndexedRecordIO(path + ".idx", path + ".rec", "r")
        header, payload = recordio.unpack(r.read_idx(3))
        assert (header.label, payload) == (3.0, b"xxx"), (header, payload)
        print("ok")
    """)
    result = subprocess.run([str(python), "-c", script, str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_image_work_without_the_image_extra_names_the_extra(io_only_env):
    python, _ = io_only_env
    script = textwrap.dedent("""
        import numpy as np
        from mxkit.core.errors import MXKitError
        from mxkit.io import image
        try:
            image.imencode(np.zeros((2, 2, 3), np.uint8))
        except MXKitError as exc:
            print(exc)
        else:
            raise SystemExit("imencode worked without OpenCV installed")
    """)
    result = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "mxkit-io[image]" in result.stdout


def test_the_wheels_carry_no_build_leftovers(io_only_env):
    _, wheels = io_only_env
    built = sorted(wheels.glob("*.whl"))
    assert len(built) == 2, built
    for wheel in built:
        names = zipfile.ZipFile(wheel).namelist()
        leftovers = [n for n in names if n.endswith((".c", ".cpp", ".pyc", ".orig"))
                     or "__pycache__" in n or "/tests/" in n]
        assert not leftovers, f"{wheel.name} carries {leftovers}"
