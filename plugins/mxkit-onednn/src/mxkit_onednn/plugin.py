"""Registers this plugin's kernels through the public ``mxkit_kernels`` hook, as any third party would.

mxkit's kernel registry applies the hooks in the order pluggy lists them and the last one
to register a kernel wins. pluggy lists ``tryfirst`` implementations last, so this hook
runs after mxkit-cpu's whatever order the entry points load in, and its kernels replace
mxkit-cpu's (which they keep, to serve the cases oneDNN does not cover).
"""

from mxkit.core import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options():
    yield OptionSpec("onednn_disable", "bool", False,
                     "register no oneDNN kernel: mxkit-cpu's kernels serve every operator")
    yield OptionSpec("onednn_root", "str", "",
                     "another oneDNN install prefix (include/, lib/libdnnl.so.3) to build against and load")


@hookimpl(tryfirst=True)
def mxkit_kernels(registry):
    from mxkit_onednn.kernels import register

    register(registry)


@hookimpl
def mxkit_cpu_workers():
    # oneDNN runs each primitive on an OpenMP team over every core. A second engine worker
    # calling it makes a second team, and libgomp, seeing more threads than cores, then
    # throttles every team's spin-wait (to 100 rounds) for the rest of the process: each
    # small primitive waits for its helper threads to wake (an MLP's Module step measured
    # 1.24 -> 0.92 ms with one worker). One team, on one worker, as MXNet's one CPU worker.
    from mxkit_onednn.library import openmp_spreads_work

    return 1 if openmp_spreads_work() else None
