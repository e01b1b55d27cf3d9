"""mxkit-core's own plugin: declares core's configuration keys through ``mxkit_options``,
the same hook every component uses (:data:`mxkit.core.config.CORE_OPTIONS`)."""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.config import CORE_OPTIONS
from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl(tryfirst=True)
def mxkit_options() -> Iterator[OptionSpec]:
    yield from CORE_OPTIONS
