"""The README's two commands are exactly what .ci/run runs, and the first runs the main job."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    block = re.search(r"```\n(python3 -m pip install uv.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block, "the README lost its block of two commands"
    return [line.strip() for line in block.group(1).strip().splitlines()]


def test_the_first_command_sets_up_and_runs_mxkit_train():
    first, second = _readme_commands()
    assert first == "python3 -m pip install uv && python3 -m uv sync --locked && python3 -m uv run mxkit train"
    assert second == "python3 -m uv run pytest"


def test_ci_runs_exactly_the_readme_commands():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("python3 -m")]
    first, second = _readme_commands()
    # CI installs uv quietly; otherwise the commands are the README's, in order
    assert ci == [first.replace("pip install uv", "pip install --quiet uv"), second]


def test_the_nox_demo_session_runs_the_main_job():
    assert '"mxkit", "train"' in (ROOT / "noxfile.py").read_text()
