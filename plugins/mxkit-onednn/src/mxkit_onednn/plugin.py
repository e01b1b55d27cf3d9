"""Registers this plugin's kernels through the public ``mxkit_kernels`` hook, as any third party would.

mxkit's kernel registry applies the hooks in the order pluggy lists them and the last one
to register a kernel wins. pluggy lists ``tryfirst`` implementations last, so this hook
runs after mxkit-cpu's whatever order the entry points load in, and its kernels replace
mxkit-cpu's (which they keep, to serve the cases oneDNN does not cover).
"""

from mxkit.core import hookimpl


@hookimpl(tryfirst=True)
def mxkit_kernels(registry):
    from mxkit_onednn.kernels import register

    register(registry)
