"""``mxkit`` is a PEP 420 namespace shared by every component distribution."""

from pathlib import Path

import mxkit

ROOT = Path(__file__).resolve().parents[1]


def test_no_distribution_ships_an_mxkit_init():
    strays = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*/src/mxkit/__init__.py"))
    assert strays == [], f"mxkit must stay a namespace package; remove {strays}"


def test_every_component_is_in_the_namespace_path():
    # (__pycache__ holds the bytecode of the plugin modules beside the components, mxkit.ndarray_plugin...)
    components = sorted({p.name for p in ROOT.glob("packages/*/src/mxkit/*") if p.is_dir() and p.name != "__pycache__"})
    assert components == ["caffe", "core", "engine", "gluon", "io", "kvstore", "memplan", "mx", "ndarray", "spark",
                          "symbol", "train"]
    assert getattr(mxkit, "__file__", None) is None  # a namespace package has no file
    for name in components:
        module = __import__(f"mxkit.{name}", fromlist=["_"])
        assert module.__name__ == f"mxkit.{name}"


def test_each_component_has_pyproject_readme_src_and_tests():
    for directory in [*ROOT.glob("packages/*"), *ROOT.glob("plugins/*")]:
        for required in ("pyproject.toml", "README.md", "src", "tests"):
            assert (directory / required).exists(), f"{directory.name} lacks {required}"
