"""Steady-state training steps allocate nothing beyond what the bind and the kernels' workspace granted.

A Module is bound (its memory plan allocated), stepped until every kernel has chosen its
implementation and sized its workspace, and then stepped again while every allocation is
counted: arrays made by the CPU backend (counted by a wrapper around its ``empty``), and every
byte of numpy data and Python objects (tracemalloc traces numpy's buffers too) live at once
above what was live when the counted steps began. A kernel that allocates a temporary per call,
a workspace that grows after the warm-up, or an optimizer that makes arrays per update fails it.

Each case runs in a fresh interpreter: with mxkit-onednn's kernels and with mxkit-cpu's alone
(``MXKIT_ONEDNN_DISABLE``, read when the plugins load). The engine runs each operation as it is
pushed, on the pushing thread, and kernels split no batch across threads (``MXKIT_ENGINE=naive``,
``MXKIT_CPU_KERNEL_THREADS=1``): the scratch mxkit-cpu's kernels keep is per thread, and under the
threaded engine a worker meets a layer's shape for the first time whenever the scheduling first
sends it there, so its buffers reach their size after an unknown number of steps (bounded: one set
per thread) and a count after a fixed warm-up would be a coin toss. One thread makes it exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

#: what a counted step may allocate of its own: engine operations, closures and the bookkeeping of a
#: step's Python (a few KB); an activation-sized temporary of this network is 512 KiB, its weight 147 KiB
SLACK_BYTES = 64 * 1024

CHILD = textwrap.dedent("""
    import json, tracemalloc
    import numpy as np
    from mxkit import mx
    from mxkit.ndarray.invoke import backend_of

    data = mx.sym.var("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=64, no_bias=True, name="conv1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=64, name="conv2")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.FullyConnected(mx.sym.flatten(net), num_hidden=10, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    rng = np.random.default_rng(0)
    batch = mx.io.DataBatch([mx.nd.array(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))],
                            [mx.nd.array(rng.integers(0, 10, 4).astype(np.float32))])
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 3, 16, 16))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4})

    def step():
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
        mx.nd.waitall()

    for _ in range(3):  # first calls choose kernels and size their workspace
        step()
    backend = backend_of(mx.cpu())
    made = []
    plain_empty = backend.empty

    def counted_empty(shape, dtype):
        array = plain_empty(shape, dtype)
        made.append((tuple(shape), str(np.dtype(dtype)), int(array.nbytes)))
        return array

    tracemalloc.start()
    step()  # tracemalloc's own tables settle
    scratch_before = backend.memory_stats().get("scratch", 0)
    tracemalloc.reset_peak()
    live_before = tracemalloc.get_traced_memory()[0]
    backend.empty = counted_empty
    try:
        for _ in range(3):
            step()
    finally:
        del backend.empty
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print("RESULT " + json.dumps({"made": made, "above": peak - live_before,
                                  "scratch_growth": backend.memory_stats().get("scratch", 0) - scratch_before,
                                  "loss": float(mod.get_outputs()[0].asnumpy()[0, 0])}))
""")


def _counted(**env: str) -> dict:
    env = {**os.environ, "MXKIT_ENGINE": "naive", "MXKIT_CPU_KERNEL_THREADS": "1", **env}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["default", "mxkit-cpu"])
def test_steady_steps_allocate_nothing_beyond_the_plan(kernels):
    counted = _counted(**({"MXKIT_ONEDNN_DISABLE": "1"} if kernels == "mxkit-cpu" else {}))
    assert counted["made"] == [], f"the backend made arrays during steady-state steps: {counted['made']}"
    assert counted["scratch_growth"] == 0, f"the kernels' scratch grew by {counted['scratch_growth']} bytes"
    assert counted["above"] <= SLACK_BYTES, (
        f"steady-state steps had {counted['above']} bytes live at once beyond what was live before them "
        f"(at most {SLACK_BYTES}): a kernel, the optimizer or the executor allocates per step outside the plan")
    assert 0.0 <= counted["loss"] <= 1.0  # a probability: the steps computed
