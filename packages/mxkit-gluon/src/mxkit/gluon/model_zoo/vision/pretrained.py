"""Finding a pretrained model's parameter file in a local directory (nothing is downloaded)."""

from __future__ import annotations

import os
from typing import Any

from mxkit.gluon.parameter import GluonError

DEFAULT_ROOT = os.path.join("~", ".mxnet", "models")


def model_file(name: str, root: str = DEFAULT_ROOT) -> str:
    """``root/name.params``, or MXNet's hashed ``root/name-<hash>.params``.

    Raises
    ------
    GluonError
        When neither exists: mxkit downloads nothing, so the file must be put there.
    """
    root = os.path.expanduser(root)
    exact = os.path.join(root, f"{name}.params")
    if os.path.isfile(exact):
        return exact
    if os.path.isdir(root):
        hashed = sorted(f for f in os.listdir(root) if f.startswith(f"{name}-") and f.endswith(".params"))
        if hashed:
            return os.path.join(root, hashed[0])
    raise GluonError(f"pretrained parameters for {name!r} not found: expected {exact} (or MXNet's "
                     f"{name}-<hash>.params there); mxkit downloads nothing, so copy the file into root={root!r} or "
                     f"pass root= the directory that holds it")


def load_pretrained(net: Any, name: str, root: str, ctx: Any) -> None:
    """Load ``name``'s parameter file from ``root`` into ``net``."""
    net.load_parameters(model_file(name, root), ctx=ctx)
