"""Loading oneDNN: the library of the ``onednn-cpu-gomp`` wheel, then this plugin's extension.

The wheel installs ``libdnnl.so.3`` into the environment's ``lib`` directory. A regular
install finds it through the extension's rpath; an editable one (the extension in the source
tree) would not, so the library is loaded by path first (``RTLD_GLOBAL``: the extension's
reference to ``libdnnl.so.3`` then resolves to it). Nothing is downloaded, ever.

When either step fails the plugin logs one message saying why and registers no kernel, so
mxkit-cpu's kernels keep serving.

oneDNN runs its primitives on OpenMP (libgomp), whose threads wait for the next parallel region
by spinning for a while, then sleeping. Here they share the cores with the engine's workers,
mxkit-cpu's kernel threads, numpy's BLAS and Python itself, all of which run between two oneDNN
calls: libgomp's default spin (300,000 rounds) takes those cores from them, and no spin at all
(``OMP_WAIT_POLICY=PASSIVE``) makes every primitive wait for its helper thread to wake up, which
on a small one costs more than the helper saves. Unless the environment sets ``OMP_WAIT_POLICY``
or ``GOMP_SPINCOUNT`` itself, the library is loaded with a short spin of 30,000 rounds
(:data:`OPENMP_DEFAULTS`; libgomp reads it once, when it loads), and the process's environment
is left as it was. The defaults also say ``OMP_WAIT_POLICY=ACTIVE``: with the spin count given, its
one effect is the spin libgomp falls back to once the process has more OpenMP threads than cores
(a second thread running oneDNN makes a second team: a process that trained through an executor,
on the engine's worker, and then imperatively, on the caller): 1,000 rounds instead of 100, which
took such an MLP step from 1,680-2,060 to 1,330-1,450 us, the same as before otherwise. Measured
on two shared cores: an MLP training step (NDArray and autograd, batch 128) 82-84k samples/s
passive, 107-108k with the short spin, 108-110k with libgomp's default; ResNet-50 v1 training at
batch 16 the same within the noise (2.81-3.03 s per batch passive, 2.85-2.99 s with spins of 3,000
to 30,000). Passive had been chosen against libgomp's
default, on ResNet-50 v1 prediction: 10.9 s per batch against 14.8-16.9 s.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

LOG = logging.getLogger("mxkit.onednn")
SONAME = "libdnnl.so.3"

_state: dict[str, object] = {}


def candidate_paths() -> list[Path]:
    """Where the wheel's ``libdnnl.so.3`` may be: ``MXKIT_ONEDNN_ROOT``, then this environment's prefixes."""
    from mxkit.core import config

    prefixes = [config.get("onednn_root"), sysconfig.get_path("data"), sys.prefix, sys.base_prefix]
    seen: list[Path] = []
    for prefix in prefixes:
        if prefix and (path := Path(prefix) / "lib" / SONAME) not in seen:
            seen.append(path)
    return seen


#: OpenMP settings the library loads under where the environment sets none (see the module's docstring)
OPENMP_DEFAULTS = {"GOMP_SPINCOUNT": "30000", "OMP_WAIT_POLICY": "ACTIVE"}
#: the variables by which a user sets libgomp's waiting; with any of them set, no default is added
_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _load() -> ModuleType:
    # libgomp reads its environment when it loads (with libdnnl): set the defaults for that moment only
    user_set = any(name in os.environ for name in _WAIT_VARIABLES)
    added = [] if user_set else [name for name in OPENMP_DEFAULTS if name not in os.environ]
    os.environ.update({name: OPENMP_DEFAULTS[name] for name in added})
    try:
        for path in candidate_paths():
            if path.is_file():
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                break
        from mxkit_onednn import _dnnl  # the rpath (or the library loaded above) resolves libdnnl
    finally:
        for name in added:
            os.environ.pop(name, None)
    return _dnnl


def load() -> ModuleType | None:
    """The extension module, or None (once logged) when oneDNN or the extension cannot be loaded."""
    if "module" not in _state:
        from mxkit.core import config

        if config.get("onednn_disable"):
            source = config.get_config().source("onednn_disable")
            _state["module"], _state["reason"] = None, f"disabled by config onednn_disable ({source})"
        else:
            try:
                _state["module"], _state["reason"] = _load(), None
            except (ImportError, OSError) as exc:
                where = ", ".join(str(p) for p in candidate_paths())
                _state["module"] = None
                _state["reason"] = (f"oneDNN could not be loaded ({type(exc).__name__}: {exc}); looked for {SONAME} "
                                    f"in {where}; install onednn-cpu-gomp==2023.2.0 (and rebuild mxkit-onednn "
                                    f"with onednn-devel-cpu-gomp) or set MXKIT_ONEDNN_ROOT")
        if _state["reason"] is not None:
            LOG.warning("mxkit-onednn registers no kernel, mxkit-cpu's kernels serve: %s", _state["reason"])
    return _state["module"]  # type: ignore[return-value]


def openmp_spreads_work() -> bool:
    """Whether oneDNN is in use with an OpenMP team of more than one thread (``OMP_NUM_THREADS``
    unset, or above 1, on more than one core): then each of its primitives occupies every core."""
    if load() is None:
        return False
    threads = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if threads.isdigit():
        return int(threads) > 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores > 1


def status() -> str:
    """``"loaded"``, or why oneDNN is not in use."""
    return "loaded" if load() is not None else str(_state["reason"])


def forget() -> None:
    """Load again on the next :func:`load` (tests)."""
    _state.clear()


__all__ = ["LOG", "OPENMP_DEFAULTS", "SONAME", "candidate_paths", "forget", "load", "openmp_spreads_work", "status"]
