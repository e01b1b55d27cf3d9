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
