"""The aggregate table of :func:`mxkit.engine.profiler.dumps`: per operator name, how many
ran and their total, minimum, maximum and mean execution time (end - start) in ms."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mxkit.core.errors import ConfigError
from mxkit.engine.profiler._trace import op_name

SORT_KEYS = ("total", "avg", "min", "max", "count")
FORMATS = ("table", "json")
_COLUMN = {"total": "Total", "avg": "Avg", "min": "Min", "max": "Max", "count": "Count"}


def aggregate(ops: Iterable[tuple[Any, ...]]) -> dict[str, dict[str, float]]:
    """Per operator name (with its scope prefix): Count, Total, Min, Max, Avg (times in ms)."""
    stats: dict[str, dict[str, float]] = {}
    for record in ops:
        name, scope, t_start, t_end = record[2], record[3], record[7], record[8]
        ms = (t_end - t_start) / 1e6
        entry = stats.get(op_name(name, scope))
        if entry is None:
            stats[op_name(name, scope)] = {"Count": 1, "Total": ms, "Min": ms, "Max": ms}
        else:
            entry["Count"] += 1
            entry["Total"] += ms
            entry["Min"] = min(entry["Min"], ms)
            entry["Max"] = max(entry["Max"], ms)
    for entry in stats.values():
        entry["Avg"] = entry["Total"] / entry["Count"]
    return stats


def check_choices(sort_by: Any, format: Any) -> None:
    """Raise :class:`ConfigError` for a ``sort_by`` or ``format`` outside the choices."""
    if sort_by not in SORT_KEYS:
        raise ConfigError(f"dumps(sort_by={sort_by!r}) is not a column to sort by; choose one of "
                          f"{', '.join(repr(k) for k in SORT_KEYS)}")
    if format not in FORMATS:
        raise ConfigError(f"dumps(format={format!r}) is not a known format; choose 'table' or 'json'")


def render(stats: dict[str, dict[str, float]], sort_by: str = "total", ascending: bool = False,
           format: str = "table") -> str:
    """The statistics as MXNet's aggregate table (``format="table"``) or JSON."""
    check_choices(sort_by, format)
    column = _COLUMN[sort_by]
    rows = sorted(stats.items(), key=lambda item: (item[1][column], item[0]), reverse=not ascending)
    if format == "json":
        return json.dumps({"Time": {"operator": {name: dict(entry) for name, entry in rows}},
                           "Unit": {"Time": "ms"}}, indent=1)
    width = max([40] + [len(name) + 2 for name, _ in rows])
    headers = ("Total Count", "Time (ms)", "Min Time (ms)", "Max Time (ms)", "Avg Time (ms)")
    lines = ["Profile Statistics:", "\tNote the difference in units for different entries.", "",
             "operator", "=================",
             f"{'Name':<{width}}" + "".join(f"{h:>16}" for h in headers),
             f"{'----':<{width}}" + "".join(f"{'-' * len(h):>16}" for h in headers)]
    for name, entry in rows:
        lines.append(f"{name:<{width}}{entry['Count']:>16d}{entry['Total']:>16.4f}{entry['Min']:>16.4f}"
                     f"{entry['Max']:>16.4f}{entry['Avg']:>16.4f}")
    return "\n".join(lines) + "\n"
