"""The built-in operator definitions; importing this package registers them all.

Every module of this package (not starting with ``_``) defines operators at import, so
adding an operator family is adding a module here.
"""

import importlib
import pkgutil


def _import_all() -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_import_all()


def _register_complete_leaky_relu() -> None:
    # nn_activation builds the complete LeakyReLU (every act_type) without registering it,
    # waiting for the leaky-only one that unary.py used to define to go; register it here
    # unless that module has started registering it itself.
    from mxkit.ndarray.registry import _REGISTRY, define

    try:
        from mxkit.ndarray.ops import nn_activation
    except ImportError:
        return
    for name in ("LEAKY_RELU", "BACKWARD_LEAKY_RELU"):
        op = getattr(nn_activation, name, None)
        if op is not None and op.name not in _REGISTRY:
            define(op)


_register_complete_leaky_relu()
