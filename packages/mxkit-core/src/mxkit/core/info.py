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
        out += ["", f"{registry.kind}s:"]
        rows = [(name, origin.describe(), getattr(spec, "description", "") or "")
                for name, spec, origin in registry.items()]
        rows += [(name, "CONFLICT: " + " and ".join(o.describe() for o in origins), "")
                 for name, origins in registry.conflicts().items()]
        out += _table(("name", "from", "description"), rows) if rows else ["  (none installed)"]
    cfg = config.get_config()
    owners = config.option_table().owners
    out += ["", "configuration"]
    out += _table(("key", "value", "source", "declared by"),
                  [(key, _show(cfg[key]), cfg.source(key), owners.get(key, "-")) for key in sorted(cfg)])
    return "\n".join(out)


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "(empty)"
    return str(value)


def main() -> int:
    """Print :func:`render_info` (``python -m mxkit.core``)."""
    print(render_info())
    return 0
