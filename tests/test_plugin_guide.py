"""docs/plugins.md works as written: its worked examples are copied out of the page,
installed as outside packages (their modules and an installed distribution's metadata with
the entry points their pyproject declares, as an installer writes them) and run in a
fresh interpreter."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "plugins.md"

#: a fenced block whose first line names the file it holds: ```python\n# path\n...```
FILE_BLOCK = re.compile(r"```(?:python|toml)\n# (?P<path>[\w./-]+)\n(?P<body>.*?)```", re.DOTALL)


def guide_files() -> dict[str, str]:
    """Path -> text of every block of the guide that names its file."""
    files = {}
    for match in FILE_BLOCK.finditer(GUIDE.read_text()):
        path = match["path"]
        assert path not in files, f"docs/plugins.md has two blocks for {path}"
        files[path] = f"# {path}\n{match['body']}"
    return files


def install(package: Path, site: Path) -> dict:
    """Put ``package`` (a folder with pyproject.toml and src/) into ``site`` as an installed
    distribution: its import packages, and a .dist-info holding its metadata and entry points."""
    project_file = tomllib.loads((package / "pyproject.toml").read_text())
    build = project_file.get("build-system", {})
    assert build.get("requires") and build.get("build-backend"), f"{package.name}: no [build-system]"
    project = project_file["project"]
    for module in (package / "src").iterdir():
        shutil.copytree(module, site / module.name)
    dist_info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir()
    requires = "".join(f"Requires-Dist: {dep}\n" for dep in project.get("dependencies", []))
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                        f"Version: {project['version']}\n{requires}")
    groups = project.get("entry-points", {})
    (dist_info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in groups.items()))
    return project


@pytest.fixture(scope="module")
def installed_guide(tmp_path_factory):
    """The guide's packages installed into a site folder; its scripts beside them."""
    work = tmp_path_factory.mktemp("guide")
    site = work / "site"
    site.mkdir()
    files = guide_files()
    for path, text in files.items():
        target = work / "packages" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    projects = {}
    for pyproject in sorted((work / "packages").glob("*/pyproject.toml")):
        project = install(pyproject.parent, site)
        projects[project["name"]] = project
    scripts = [work / "packages" / path for path in files if "/" not in path]
    env = {key: value for key, value in os.environ.items() if not key.startswith("MXKIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return projects, scripts, env


def run(code_or_script, env, cwd):
    args = [sys.executable, str(code_or_script)] if isinstance(code_or_script, Path) else \
        [sys.executable, "-c", code_or_script]
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_the_guide_holds_both_complete_packages(installed_guide):
    projects, scripts, _ = installed_guide
    assert set(projects) == {"mxkit-fakedev", "mxkit-fakedev-relu"}
    assert projects["mxkit-fakedev"]["entry-points"]["mxkit"] == {"fakedev": "mxkit_fakedev.plugin"}
    assert [script.name for script in scripts] == ["use_fakedev.py", "use_fakedev_relu.py"]


def test_the_guide_documents_every_backend_spec_field_and_backend_member():
    import dataclasses

    from mxkit.core.specs import BackendSpec
    from mxkit.ndarray.backend import REQUIRED_MEMBERS, Backend

    guide = GUIDE.read_text()
    for spec_field in dataclasses.fields(BackendSpec):
        assert f"| `{spec_field.name}` |" in guide, f"BackendSpec.{spec_field.name} is not documented"
    public = [name for name in vars(Backend) if not name.startswith("_") and callable(getattr(Backend, name))]
    for member in [*REQUIRED_MEMBERS, *public]:
        assert f"| `{member}" in guide, f"Backend.{member} is not documented"


def test_the_guide_scripts_run_as_written(installed_guide):
    _, scripts, env = installed_guide
    for script in scripts:
        done = run(script, env, script.parent)
        assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"


def test_the_guide_backend_holds_and_computes_and_its_kernel_override_runs(installed_guide):
    _, scripts, env = installed_guide
    check = """
import numpy as np
from mxkit import mx
from mxkit.core.plugins import list_plugins
from mxkit_fakedev.backend import FakeDevBackend
from mxkit_fakedev_relu.kernels import CALLS

dev = mx.Context('fakedev', 0)
a = mx.nd.ones((2, 3), ctx=dev)
assert isinstance(dev.backend, FakeDevBackend)
np.testing.assert_array_equal((a * 3 - 1).asnumpy(), np.full((2, 3), 2.0, np.float32))
before = CALLS[0]
out = mx.nd.relu(a - 2)
np.testing.assert_array_equal(out.asnumpy(), np.zeros((2, 3), np.float32))
assert CALLS[0] == before + 1, CALLS
assert out.context == dev
moved = dev.backend.memory_stats()
assert moved['to_host'] > 0, moved
origins = {p.plugin: p.distribution for p in list_plugins()}
assert origins['fakedev'] == 'mxkit-fakedev' and origins['fakedev_relu'] == 'mxkit-fakedev-relu', origins
print('ok')
"""
    done = run(check, env, scripts[0].parent)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), f"{done.stdout}\n{done.stderr}"
