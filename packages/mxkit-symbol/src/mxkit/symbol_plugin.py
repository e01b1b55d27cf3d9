"""mxkit-symbol's plugin: the configuration keys of the executor and the graph passes.

Registered by mxkit-core's plugin manager as a built-in. It sits beside ``mxkit.symbol``, not
inside it, because importing ``mxkit.symbol`` loads numpy and its operators, and building the
plugin manager (which any configuration read does) must stay cheap: a memplan-only
program never pays for the array layer.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.core.hookspecs import hookimpl
from mxkit.core.specs import OptionSpec


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """``exec_bulk_size`` and ``exec_record`` (executor) and the mirror pass's keys (passes, mirror)."""
    yield OptionSpec("exec_bulk_size", "int", 15,
                     "nodes per engine push when an executor runs (MXNet's MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN)",
                     minimum=1)
    yield OptionSpec("exec_record", "bool", True,
                     "on a device that can record kernels and replay them (CUDA graphs), an executor records each "
                     "phase (forward in training or prediction mode, backward) on its second run and replays that "
                     "recording from then on: one launch instead of one per kernel. Graphs with random operators "
                     "or operators that run off the device's queue never record")
    yield OptionSpec("fold_batchnorm", "bool", True,
                     "fold BatchNorm into the Convolution before it in prediction binds (every grad_req "
                     "'null'): the graph pass 'fold_batchnorm', which derives the weights at every forward and "
                     "never changes the parameters")
    yield OptionSpec("eliminate_common_expr", "bool", True,
                     "merge forward nodes that compute the same operator on the same inputs (the graph pass "
                     "'eliminate_common_expr'; MXNet's MXNET_ELIMINATE_COMMON_EXPR); random, stateful and custom "
                     "operators never merge")
    yield OptionSpec("fuse_conv", "bool", True,
                     "in prediction binds, make a Convolution and the relu and residual addition after it one "
                     "_FusedConvolution node (the graph pass 'fuse_conv'), where a kernel plugin serves that "
                     "operator (mxkit-onednn: oneDNN's post-ops); without one the graph is unchanged")
    yield OptionSpec("backward_do_mirror", "bool", False,
                     "recompute cheap forward results in backward instead of keeping them (the graph pass "
                     "'mirror'; MXNet's MXNET_BACKWARD_DO_MIRROR)")
    yield OptionSpec("mirror_policy", "str", "sqrt",
                     "which forward results the mirror pass keeps: 'sqrt' (Chen et al.'s segments) or 'cheap' "
                     "(MXNet's: keep convolution/fully-connected outputs, recompute the rest)",
                     choices=("sqrt", "cheap"))
    yield OptionSpec("mirror_segment_mb", "float", 0.0,
                     "megabytes of forward results per recomputed segment under mirror_policy 'sqrt' "
                     "(0: searched, minimising the bytes kept plus the largest segment)", minimum=0)
