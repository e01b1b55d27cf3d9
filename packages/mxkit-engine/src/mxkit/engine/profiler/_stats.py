"""The aggregate table of :func:`mxkit.engine.profiler.dumps`: per operator name, how many
ran and their total, minimum, maximum and mean execution time (end - start) in ms; per
domain, the same of the user's tasks, frames and events; and, as MXNet's "Memory" section,
the count, minimum, maximum and mean of every counter's values (the user's counters, and
with ``profile_memory`` the kB in use per device and kind)."""

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


def aggregate_host(host_events: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per domain and name, the durations (ms) of the host's tasks, frames and events."""
    domains: dict[str, dict[str, dict[str, float]]] = {}
    for event in host_events:
        if event.get("ph") != "X" or "end_ns" not in event or event.get("cat") == "scope":
            continue
        ms = (event["end_ns"] - event["t_ns"]) / 1e6
        entry = domains.setdefault(str(event.get("cat")), {}).get(event["name"])
        if entry is None:
            domains[str(event.get("cat"))][event["name"]] = {"Count": 1, "Total": ms, "Min": ms, "Max": ms}
        else:
            entry["Count"] += 1
            entry["Total"] += ms
            entry["Min"] = min(entry["Min"], ms)
            entry["Max"] = max(entry["Max"], ms)
    for stats in domains.values():
        for entry in stats.values():
            entry["Avg"] = entry["Total"] / entry["Count"]
    return domains


def aggregate_counters(host_events: Iterable[dict[str, Any]],
                       memory_events: Iterable[tuple[int, str, str, int]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per domain and counter name: Count, Min, Max and Avg of the values it took (MXNet's
    "Memory" section); memory in use is ``Memory: <device>`` / ``<kind>`` in kB."""
    values: dict[str, dict[str, list[float]]] = {}
    for event in host_events:
        if event.get("ph") == "C":
            for name, value in event.get("args", {}).items():
                values.setdefault(str(event.get("cat")), {}).setdefault(name, []).append(float(value))
    for _t_ns, device, kind, in_use in memory_events:
        values.setdefault(f"Memory: {device}", {}).setdefault(kind, []).append(in_use / 1024.0)
    return {domain: {name: {"Count": len(v), "Min": min(v), "Max": max(v), "Avg": sum(v) / len(v)}
                     for name, v in counters.items()}
            for domain, counters in values.items()}


def check_choices(sort_by: Any, format: Any) -> None:
    """Raise :class:`ConfigError` for a ``sort_by`` or ``format`` outside the choices."""
    if sort_by not in SORT_KEYS:
        raise ConfigError(f"dumps(sort_by={sort_by!r}) is not a column to sort by; choose one of "
                          f"{', '.join(repr(k) for k in SORT_KEYS)}")
    if format not in FORMATS:
        raise ConfigError(f"dumps(format={format!r}) is not a known format; choose 'table' or 'json'")


def _sorted(stats: dict[str, dict[str, float]], column: str, ascending: bool) -> list[tuple[str, dict[str, float]]]:
    # counters have no Total: they sort by Count there, as MXNet's memory rows do
    return sorted(stats.items(), key=lambda item: (item[1].get(column, item[1]["Count"]), item[0]),
                  reverse=not ascending)


def render(stats: dict[str, dict[str, float]], sort_by: str = "total", ascending: bool = False,
           format: str = "table", host: dict[str, dict[str, dict[str, float]]] | None = None,
           counters: dict[str, dict[str, dict[str, float]]] | None = None) -> str:
    """The statistics as MXNet's aggregate table (``format="table"``) or JSON
    (``{"Time": {domain: {name: stats}}, "Memory": {domain: {name: stats}}, "Unit": ...}``)."""
    check_choices(sort_by, format)
    column = _COLUMN[sort_by]
    rows = _sorted(stats, column, ascending)
    if format == "json":
        time = {"operator": {name: dict(entry) for name, entry in rows}}
        for domain, domain_stats in (host or {}).items():
            time[domain] = {name: dict(entry) for name, entry in _sorted(domain_stats, column, ascending)}
        memory = {domain: {name: dict(entry) for name, entry in _sorted(domain_stats, column, ascending)}
                  for domain, domain_stats in (counters or {}).items()}
        return json.dumps({"Time": time, "Memory": memory, "Unit": {"Time": "ms", "Memory": "kB"}}, indent=1)
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
