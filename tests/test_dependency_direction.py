"""Dependencies point one way (DESIGN §1): each distribution may depend only on these."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED = {
    "mxkit-core": set(),
    "mxkit-engine": {"mxkit-core"},
    "mxkit-memplan": {"mxkit-core"},
    "mxkit-io": {"mxkit-core"},
    "mxkit-ndarray": {"mxkit-core", "mxkit-engine"},
    "mxkit-symbol": {"mxkit-core", "mxkit-ndarray", "mxkit-memplan", "mxkit-engine"},
    "mxkit-kvstore": {"mxkit-core", "mxkit-ndarray", "mxkit-engine"},
    "mxkit-train": {"mxkit-core", "mxkit-ndarray", "mxkit-symbol", "mxkit-io", "mxkit-kvstore", "mxkit-engine",
                    "mxkit-memplan"},
    "mxkit-caffe": {"mxkit-core", "mxkit-ndarray", "mxkit-symbol", "mxkit-engine", "mxkit-memplan"},
    "mxkit-gluon": {"mxkit-core", "mxkit-ndarray", "mxkit-symbol", "mxkit-train", "mxkit-kvstore", "mxkit-io",
                    "mxkit-engine", "mxkit-memplan"},
    # training and prediction on Spark data: above train (and gluon, an optional extra)
    "mxkit-spark": {"mxkit-core", "mxkit-engine", "mxkit-ndarray", "mxkit-symbol", "mxkit-io", "mxkit-kvstore",
                    "mxkit-train", "mxkit-memplan", "mxkit-gluon"},
    "mxkit-cpu": {"mxkit-core", "mxkit-ndarray"},
    "mxkit-cuda": {"mxkit-core", "mxkit-ndarray"},
    # its kernels fall back to mxkit-cpu's through the registry (never an import)
    "mxkit-onednn": {"mxkit-core", "mxkit-ndarray", "mxkit-cpu"},
}


def _mxkit_requirements(pyproject: Path) -> tuple[str, set[str]]:
    project = tomllib.loads(pyproject.read_text())["project"]
    names = {re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0] for req in project.get("dependencies", [])}
    return project["name"], {n for n in names if n.startswith("mxkit")}


def test_component_dependencies_point_one_way():
    seen = set()
    for pyproject in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("plugins/*/pyproject.toml")]:
        name, requires = _mxkit_requirements(pyproject)
        if name == "mxkit":
            continue  # the facade installs everything
        seen.add(name)
        assert requires <= ALLOWED[name], f"{name} must not depend on {sorted(requires - ALLOWED[name])}"
    assert seen == set(ALLOWED)


def test_core_depends_on_pluggy_only_and_memplan_on_core_only():
    core = tomllib.loads((ROOT / "packages/mxkit-core/pyproject.toml").read_text())["project"]
    assert [re.split(r"[<>=]", d)[0] for d in core["dependencies"]] == ["pluggy"]
    memplan = tomllib.loads((ROOT / "packages/mxkit-memplan/pyproject.toml").read_text())["project"]
    assert memplan["dependencies"] == ["mxkit-core"]


def test_the_facade_installs_onednn_where_pypi_builds_it_and_mxkit_cpu_everywhere():
    from packaging.requirements import Requirement

    facade = tomllib.loads((ROOT / "packages/mxkit/pyproject.toml").read_text())["project"]
    requirements = {r.name: r for r in map(Requirement, facade["dependencies"])}
    assert requirements["mxkit-cpu"].marker is None
    onednn = requirements["mxkit-onednn"].marker
    assert onednn is not None
    assert onednn.evaluate({"sys_platform": "linux", "platform_machine": "x86_64"})
    for platform, machine in (("linux", "aarch64"), ("darwin", "x86_64"), ("win32", "AMD64")):
        assert not onednn.evaluate({"sys_platform": platform, "platform_machine": machine})
