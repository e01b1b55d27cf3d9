"""Installing a part of mxkit, as the user guide's "Installing parts" says: wheels built from this
repository, a subset of them installed into a fresh virtual environment, and that subset working
without the components it did not ask for.

Everything runs offline. The wheels are built without build isolation (hatchling is a development
dependency), installed with ``--no-deps``, and the two third-party packages the subset needs
(numpy, pluggy) are linked in from this environment; ``uv pip check`` then proves that what the
wheels declare they need is exactly what is there.
"""

from __future__ import annotations

import shutil
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


#: what mxkit-core and mxkit-io need from outside mxkit
THIRD_PARTY = ("numpy", "pluggy")


def _link_third_party(venv: Path) -> None:
    """Link the installed third-party packages into ``venv``'s site-packages (with their
    metadata, so dependency checks see them)."""
    import importlib.metadata

    (site,) = (venv / "lib").glob("python3*/site-packages")
    for name in THIRD_PARTY:
        dist = importlib.metadata.distribution(name)
        top = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for entry in top:
            source = Path(str(dist.locate_file(entry)))
            if not source.exists() or (site / entry).exists():
                continue
            if entry.endswith(".dist-info"):  # copied: installers skip a linked metadata folder
                shutil.copytree(source, site / entry)
            else:
                (site / entry).symlink_to(source)


@pytest.fixture(scope="module")
def io_only_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh venv holding mxkit-io and what it needs (mxkit-core), from wheels built here."""
    pytest.importorskip("hatchling", reason="the wheels are built with hatchling (a development dependency)")
    work = tmp_path_factory.mktemp("parts")
    wheels = work / "wheels"
    for part in ("mxkit-core", "mxkit-io"):
        _uv("build", "--offline", "--no-build-isolation", "--python", sys.executable, "--wheel", "--quiet",
            "--out-dir", str(wheels),
            str(REPO / "packages" / part), cwd=work)
    venv = work / "venv"
    _uv("venv", "--offline", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    python = venv / "bin" / "python"
    _link_third_party(venv)
    _uv("pip", "install", "--offline", "--no-deps", "--quiet", "--python", str(python),
        *map(str, sorted(wheels.glob("*.whl"))), cwd=work)
    # the wheels' declared requirements are met by exactly what is installed
    _uv("pip", "check", "--python", str(python), cwd=work)
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
