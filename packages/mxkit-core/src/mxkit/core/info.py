"""``mxkit info``: every registered plugin by kind, and the configuration in force."""

from __future__ import annotations

from collections.abc import Sequence

from mxkit.core import config
from mxkit.core.plugins import _REGISTRIES, list_plugins


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return [line.format(*header).rstrip(), line.format(*("-" * w for w in widths)).rstrip()] + [
        line.format(*row).rstrip() for row in rows
    ]


def render_info() -> str:
    """The text ``mxkit info`` prints."""
    out: list[str] = ["mxkit plugins", ""]
    plugin_rows = [(p.plugin, p.distribution or "-", p.version or "-") for p in list_plugins()]
    out += _table(("plugin", "distribution", "version"), plugin_rows) if plugin_rows else ["(none)"]
    for kind, registry in _REGISTRIES.items():
        if kind == "option":
            continue  # shown with the configuration, owner beside each key
        out += ["", f"{_plural(registry.kind)}:"]
        rows = [(name, origin.describe(), _describe(spec)) for name, spec, origin in registry.items()]
        rows += [(name, "CONFLICT: " + " and ".join(o.describe() for o in origins), "")
                 for name, origins in registry.conflicts().items()]
        out += _table(("name", "from", "description"), rows) if rows else ["  (none installed)"]
    cfg = config.get_config()
    owners = config.option_table().owners
    out += ["", "configuration"]
    out += _table(("key", "value", "source", "declared by"),
                  [(key, _show(cfg[key]), cfg.source(key), owners.get(key, "-")) for key in sorted(cfg)])
    return "\n".join(out)


def _plural(kind: str) -> str:
    """``backend (device type)`` -> ``backends (device types)``; ``engine`` -> ``engines``."""
    head, sep, tail = kind.partition(" (")
    return f"{head}s{sep}{tail[:-1]}s)" if sep and tail.endswith(")") else f"{kind}s"


def _describe(spec: object) -> str:
    """A spec's description; for a backend, also how many devices it finds here (0 says why it can't run)."""
    description = str(getattr(spec, "description", "") or "")
    count = getattr(spec, "count_devices", None)
    if count is None:
        return description
    try:
        found = int(count())
    except Exception as exc:  # a broken driver must not break `mxkit info`
        return f"{description} [devices: unknown, {type(exc).__name__}: {exc}]"
    return f"{description} [{found} device{'' if found == 1 else 's'} here]"


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "(empty)"
    return str(value)


def main() -> int:
    """Print :func:`render_info` (``python -m mxkit.core``)."""
    print(render_info())
    return 0
