"""The one plotting helper the components share: a matplotlib figure with no display.

memplan's ``MemoryPlan.plot``, train's ``PlotMetrics`` and the command line's ``--plot``
options draw with matplotlib, an optional dependency of each (its ``[plot]`` extra).
matplotlib is imported only here and only when a figure is made, so importing a component
never loads it.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import MissingComponentError


def matplotlib_figure(purpose: str, extra: str) -> Any:
    """A new matplotlib ``Figure`` on the Agg canvas, or a clear error when matplotlib is missing.

    No pyplot: a figure not registered with pyplot needs no display, leaks no global state
    and is freed with its last reference.

    Parameters
    ----------
    purpose : str
        What wants the figure (``"MemoryPlan.plot"``), for the error message.
    extra : str
        The pip requirement that brings matplotlib for that use (``"mxkit-memplan[plot]"``).

    Raises
    ------
    MissingComponentError
        matplotlib is not installed; the message says which extra to install.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "matplotlib":
            raise
        raise MissingComponentError(
            f"{purpose} needs matplotlib, which is not installed; install it with pip install '{extra}'"
        ) from None
    figure = Figure(figsize=(9, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


__all__ = ["matplotlib_figure"]
