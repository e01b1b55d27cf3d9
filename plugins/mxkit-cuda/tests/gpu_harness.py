"""Run one operator imperatively (NDArray + autograd) on a device and bring everything back to numpy.

The GPU tests run the same call on ``cpu(0)`` and ``gpu(0)`` and compare: the CPU backend is
the reference (itself checked against MXNet 1.9.1 and finite differences by mxkit-ndarray).
"""

from __future__ import annotations

import numpy as np
from mxkit.core import cpu, gpu
from mxkit.ndarray import array, autograd
from mxkit.ndarray.invoke import invoke_by_name


def run_operator(ctx, name, inputs, params, aux=(), heads=None, diff=None, train=True):
    """Outputs, input gradients (``diff`` indices; default every float input) and aux states after."""
    arrays = [array(x, ctx=ctx, dtype=np.asarray(x).dtype) for x in inputs]
    aux_arrays = [array(a, ctx=ctx, dtype=np.asarray(a).dtype) for a in aux]
    if diff is None:
        diff = [i for i, x in enumerate(inputs) if np.asarray(x).dtype.kind == "f"]
    for i in diff:
        arrays[i].attach_grad()
    with autograd.record(train_mode=train):
        result = invoke_by_name(name, *arrays, *aux_arrays, **params)
    outputs = result if isinstance(result, list) else [result]
    grads = {}
    if diff:
        if heads is None:
            rng = np.random.default_rng(7)
            heads = [rng.uniform(-1, 1, o.shape).astype(o.dtype) for o in outputs]
        head_arrays = [array(h, ctx=ctx, dtype=o.dtype) for h, o in zip(heads, outputs)]
        head_arrays += [None] * (len(outputs) - len(head_arrays))
        live = [(o, h) for o, h in zip(outputs, head_arrays) if h is not None]
        autograd.backward([o for o, _ in live], [h for _, h in live], train_mode=train)
        grads = {i: arrays[i].grad.asnumpy() for i in diff}
    return [o.asnumpy() for o in outputs], grads, [a.asnumpy() for a in aux_arrays]


def assert_same_on_gpu(name, inputs, params, aux=(), heads=None, diff=None, train=True, rtol=1e-4, atol=1e-5):
    """Assert that ``gpu(0)`` gives what ``cpu(0)`` gives for outputs, gradients and aux states."""
    expected = run_operator(cpu(0), name, inputs, params, aux, heads, diff, train)
    actual = run_operator(gpu(0), name, inputs, params, aux, heads, diff, train)
    for i, (want, got) in enumerate(zip(expected[0], actual[0])):
        assert got.dtype == want.dtype, f"{name}: output {i} dtype {got.dtype} on gpu, {want.dtype} on cpu"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{name} {params}: output {i}")
    for i, want in expected[1].items():
        np.testing.assert_allclose(actual[1][i], want, rtol=rtol, atol=atol,
                                   err_msg=f"{name} {params}: gradient of input {i}")
    for i, (want, got) in enumerate(zip(expected[2], actual[2])):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{name} {params}: aux state {i}")
