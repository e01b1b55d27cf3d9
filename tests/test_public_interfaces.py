"""Components talk through published interfaces: no distribution imports another's private
(``_``-prefixed) names or modules, and nothing outside mxkit-ndarray reaches into an NDArray.

The checks read the source with :mod:`ast`, so they see imports inside functions too (which
a look at the pyproject files cannot). An NDArray's storage, engine var and context are
published as ``storage``, ``var`` and ``context``, and ``NDArray.from_storage`` makes one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: NDArray's private fields and constructor, which only mxkit-ndarray may touch
NDARRAY_PRIVATE_ATTRIBUTES = {"_data", "_var", "_ctx", "_from_data"}


def distributions() -> dict[str, Path]:
    """Every first-party distribution (and the outside example plugin) by name: its src folder."""
    found = {}
    for pyproject in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("plugins/*/pyproject.toml"),
                      *ROOT.glob("tests/plugins/*/pyproject.toml")]:
        src = pyproject.parent / "src"
        if src.is_dir():
            found[pyproject.parent.name] = src
    return found


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def owners() -> dict[str, str]:
    """Module name -> the distribution that ships it (for every module of every distribution)."""
    table = {}
    for dist, src in distributions().items():
        for path in src.rglob("*.py"):
            table[module_name(src, path)] = dist
    return table


def owner_of(module: str, table: dict[str, str]) -> str | None:
    parts = module.split(".")
    while parts:
        found = table.get(".".join(parts))
        if found is not None:
            return found
        parts.pop()
    return None


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def resolve_relative(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def cross_distribution_private_imports(dist: str, src: Path, table: dict[str, str],
                                       root: Path = ROOT) -> list[str]:
    """``path:line: what`` for every private name or module this distribution imports from another."""
    problems = []
    for path in sorted(src.rglob("*.py")):
        module = module_name(src, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve_relative(node, module, path.name == "__init__.py")
                targets = [(base, alias.name) for alias in node.names]
            else:
                continue
            for target, name in targets:
                other = owner_of(target, table)
                if other is None or other == dist:
                    continue
                full = target if name is None else f"{target}.{name}"
                # a name imported from a module may itself be a submodule: check every part
                private = [part for part in full.split(".") if is_private(part)]
                if private:
                    where = path.relative_to(root)
                    problems.append(f"{where}:{node.lineno}: imports {full} of {other} (private: {private[0]})")
    return problems


def ndarray_private_reads(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``path:line: what`` for every read of an NDArray private field or call of ``_from_data``.

    ``self._data`` (and the others) on ``self`` is a class's own attribute, not an NDArray's.
    """
    problems = []
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in NDARRAY_PRIVATE_ATTRIBUTES:
                continue
            if node.attr != "_from_data" and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            problems.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    return problems


def checked_distributions() -> dict[str, Path]:
    return distributions()


def test_the_check_sees_every_distribution():
    names = set(distributions())
    assert {"mxkit-core", "mxkit-engine", "mxkit-ndarray", "mxkit-symbol", "mxkit-train", "mxkit-io",
            "mxkit", "mxkit-cpu", "mxkit-cuda", "mxkit-recorder-plugin"} <= names


@pytest.mark.parametrize("dist", sorted(checked_distributions()))
def test_no_distribution_imports_private_names_of_another(dist):
    table = owners()
    problems = cross_distribution_private_imports(dist, checked_distributions()[dist], table)
    assert not problems, "use the published names instead:\n" + "\n".join(problems)


def test_nothing_outside_ndarray_reaches_into_an_ndarray():
    paths = []
    for dist, src in checked_distributions().items():
        if dist != "mxkit-ndarray":
            paths += sorted(src.rglob("*.py"))
    paths += sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    problems = ndarray_private_reads(paths)
    assert not problems, ("use NDArray.storage / .var / .context and NDArray.from_storage:\n"
                          + "\n".join(problems))


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The checks fail on a module that does what they forbid (inside a function, too)."""
    src = tmp_path / "src"
    (src / "outside").mkdir(parents=True)
    bad = src / "outside" / "mod.py"
    bad.write_text("def f(a):\n"
                   "    from mxkit.ndarray.ops.nn_conv import _Geometry\n"
                   "    import mxkit.ndarray.ops._fused_program\n"
                   "    from mxkit.ndarray import ndarray\n"
                   "    return a._data, a._var, ndarray.NDArray._from_data(1, 2, 3), self_ok(a)\n")
    table = owners()
    table["outside.mod"] = "outside"
    found = cross_distribution_private_imports("outside", src, table, root=tmp_path)
    assert len(found) == 2 and "_Geometry" in found[0] and "_fused_program" in found[1]
    reads = ndarray_private_reads([bad], root=tmp_path)
    assert [line.rsplit(".", 1)[1] for line in reads] == ["_data", "_var", "_from_data"]
    (src / "outside" / "own.py").write_text("class Own:\n    def size(self):\n        return self._data.size\n")
    assert ndarray_private_reads([src / "outside" / "own.py"], root=tmp_path) == []
