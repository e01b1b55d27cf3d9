"""mxkit's task runner.

    nox -s tests        the whole test suite in the workspace environment (the README's command)
    nox -s lint         ruff
    nox -s typecheck    mypy (strict on mxkit-core)
    nox -s docs         redraw the guide's pictures, then build docs/ with warnings as errors
    nox -s bench        run every benchmark in benchmarks/
    nox -s wheels       every distribution as a wheel in dist/wheels (install any subset from there)
    nox -s isolated     the per-component isolation matrix (tox.ini) on freshly built wheels
    nox -s demo         the main job (mxkit train)
"""

from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "uv"


def _uv_run(session: nox.Session, *args: str) -> None:
    session.run("uv", "run", *args, external=True)


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    """Every package's tests and the cross-package tests."""
    _uv_run(session, "pytest", *session.posargs)


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    _uv_run(session, "ruff", "check", ".")


@nox.session(python=False)
def typecheck(session: nox.Session) -> None:
    """mypy: strict on mxkit-core (pyproject [tool.mypy]), checked elsewhere."""
    _uv_run(session, "mypy", "packages/mxkit-core/src", "packages/mxkit/src")


@nox.session
def docs(session: nox.Session) -> None:
    """Redraw the guide's pictures from real runs (docs/make_pictures.py), then build docs/ with
    Sphinx; any warning fails the build."""
    _uv_run(session, "python", str(ROOT / "docs" / "make_pictures.py"))
    session.install("sphinx>=7", "myst-parser>=3")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Run each benchmark; they print tables and never fail on a time."""
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        session.log(f"== {script.name}")
        _uv_run(session, "python", str(script), *session.posargs)


WHEELS = ROOT / "dist" / "wheels"


@nox.session(python=False)
def wheels(session: nox.Session) -> None:
    """Build every distribution as a wheel into dist/wheels, to install any subset of them with
    ``pip install --find-links dist/wheels mxkit-io`` (the user guide's "Installing parts")."""
    session.run("uv", "build", "--all-packages", "--wheel", "--out-dir", str(WHEELS), external=True)


@nox.session(python=False)
def isolated(session: nox.Session) -> None:
    """Build every distribution as a wheel, then test each component alone (tox.ini)."""
    wheels(session)
    _uv_run(session, "tox", "run-parallel", "--parallel", "2", *session.posargs)


@nox.session(python=False)
def demo(session: nox.Session) -> None:
    """The main job, as the README's first command runs it (``mxkit train``)."""
    _uv_run(session, "mxkit", "train", *session.posargs)
