"""Kernels bound to fixed arrays (the registry's ``kernel.bind``, which executors use): a bound call computes
exactly what the plain call computes, again on every call as the arrays' contents change, through whatever
serves its shape (a oneDNN program or the replaced kernel); calls it cannot bind are left to the plain kernel."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.ndarray.registry import get_registry
from onednn_harness import _outputs, needs_onednn

pytestmark = needs_onednn

CASES = [
    ("FullyConnected", lambda rng: [rng.standard_normal((6, 2, 5)), rng.standard_normal((3, 10)),
                                    rng.standard_normal(3)], dict(num_hidden=3)),
    ("_backward_FullyConnected", lambda rng: [rng.standard_normal((6, 3)), rng.standard_normal((6, 10)),
                                              rng.standard_normal((3, 10))], dict(num_hidden=3)),
    ("Activation", lambda rng: [rng.standard_normal((4, 7))], dict(act_type="tanh")),
    ("_backward_relu", lambda rng: [rng.standard_normal((4, 7)), np.maximum(rng.standard_normal((4, 7)), 0)], {}),
]


def _arrays(make, seed):
    return [a.astype(np.float32) for a in make(np.random.default_rng(seed))]


@pytest.mark.parametrize("which", ["plain", None])
@pytest.mark.parametrize("name, make, params", CASES, ids=[case[0] for case in CASES])
def test_a_bound_call_equals_the_plain_call_on_every_call(which, name, make, params):
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    PROGRAMS.only = which  # a oneDNN program alone, or the fastest of it and the replaced kernel
    try:
        op, typed, outputs = _outputs(name, _arrays(make, 0), params)
        kernel = op.kernel_for("numpy")
        inputs = _arrays(make, 0)
        bound = kernel.bind(np, inputs, outputs, typed)
        assert bound is not None
        for seed in range(4):  # the first call chooses what serves; the later ones run it directly
            for array, fresh in zip(inputs, _arrays(make, seed)):
                array[...] = fresh
            bound()
            _, _, expected = _outputs(name, inputs, params)
            kernel(np, inputs, expected, typed)
            for got, want in zip(outputs, expected):
                np.testing.assert_array_equal(got, want)
    finally:
        PROGRAMS.only = None
        PROGRAMS.clear()


def test_inputs_that_would_be_copied_are_read_afresh_on_every_call():
    """A strided input would be copied by the preparation: such a call is bound as a plain call, which
    reads the array's contents as they are on each call (a copy made at the bind would not)."""
    op = get_registry().get("FullyConnected")
    typed = op.parse_params(dict(num_hidden=3, no_bias=True))
    storage = np.ones((10, 6), np.float32)
    x, w = storage[:, ::2], np.ones((3, 3), np.float32)
    out = np.empty((10, 3), np.float32)
    bound = op.kernel_for("numpy").bind(np, [x, w], [out], typed)
    bound()
    np.testing.assert_array_equal(out, 3.0)
    storage[...] = 2.0
    bound()
    np.testing.assert_array_equal(out, 6.0)


def test_parameters_onednn_does_not_implement_bind_the_replaced_kernel():
    op = get_registry().get("Activation")
    kernel = op.kernel_for("numpy")
    typed = op.parse_params(dict(act_type="softsign"))  # mxkit-cpu's: oneDNN's is not accurate enough
    x = np.linspace(-3, 3, 12, dtype=np.float32)
    out, expected = np.empty_like(x), np.empty_like(x)
    bound = kernel.bind(np, [x], [out], typed)
    bound()
    kernel.replaced(np, [x], [expected], typed)
    np.testing.assert_array_equal(out, expected)


def test_outputs_that_are_not_contiguous_get_their_results_copied_back_on_every_call():
    op = get_registry().get("Activation")
    typed = op.parse_params(dict(act_type="relu"))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    storage = np.zeros(16, np.float32)
    out = storage[::2]
    bound = op.kernel_for("numpy").bind(np, [x], [out], typed)
    for scale in (1.0, -2.0):
        x[...] = np.linspace(-1, 1, 8, dtype=np.float32) * scale
        bound()
        np.testing.assert_array_equal(out, np.maximum(x, 0))
        assert not storage[1::2].any()


def test_a_call_the_replaced_kernel_serves_is_handed_to_it_without_preparing_again(monkeypatch):
    """Once the program cache says the replaced kernel serves a call's shapes, later plain calls of the
    same signature go to it directly (no views, no key worked out), with the same results; a call of
    another signature, a cleared cache or a forced builder take the full path again."""
    from mxkit_onednn import kernels
    from mxkit_onednn.program import FALLBACK, ProgramCache

    cache = ProgramCache()
    prepared, served = [], []

    def replaced(xp, inputs, outputs, params):
        served.append(inputs[0].shape)
        np.multiply(inputs[0], params["scale"], out=outputs[0])

    def prepare(inputs, outputs, params, fallback):
        from mxkit_onednn.program import BoundCall

        prepared.append(inputs[0].shape)
        # no builder: the replaced kernel is the one candidate, so it serves the key
        return BoundCall(cache, ("scale", inputs[0].shape), {}, inputs, outputs, fallback)

    def kernel(inputs, outputs, params, fallback):
        prepare(inputs, outputs, params, fallback).once()

    kernel.prepare = prepare
    serve = kernels.with_fallback(kernels.handles(scale=kernels.ANY)(kernel), replaced)
    x, out = np.arange(6, dtype=np.float32).reshape(2, 3), np.empty((2, 3), np.float32)
    for _ in range(3):
        serve(np, [x], [out], {"scale": 2.0})
    np.testing.assert_array_equal(out, x * 2)
    assert prepared == [(2, 3)] and served == [(2, 3)] * 3 and cache.program(("scale", (2, 3))) is FALLBACK
    serve(np, [x], [out], {"scale": 3.0})  # other parameters: another signature
    np.testing.assert_array_equal(out, x * 3)
    assert len(prepared) == 2
    serve(np, [x.T.copy()], [np.empty((3, 2), np.float32)], {"scale": 2.0})  # other shapes
    assert len(prepared) == 3
    serve(np, [x[:, ::2]], [np.empty((2, 2), np.float32)], {"scale": 2.0})  # strided: never remembered
    serve(np, [x[:, ::2]], [np.empty((2, 2), np.float32)], {"scale": 2.0})
    assert len(prepared) == 5
    cache.clear()  # what served is forgotten: the next call finds out again
    serve(np, [x], [out], {"scale": 2.0})
    assert len(prepared) == 6
    cache.only = "plain"  # a forced builder: every call takes the full path
    serve(np, [x], [out], {"scale": 2.0})
    assert len(prepared) == 7


@pytest.mark.parametrize("views", ["as given", "reshaped", "copied"])
def test_a_call_a_program_serves_runs_it_without_preparing_again_when_its_views_are_the_arrays(views):
    """Once a program serves a signature and the call's views were its own arrays (reshaped or not), later
    calls of that signature run the program on their own arrays directly; views that were copies are
    worked out again on every call. Each call's result is its own input's."""
    from mxkit_onednn import kernels
    from mxkit_onednn.program import BoundCall, Program, ProgramCache

    cache = ProgramCache()
    cache.only = "plain"  # the program serves (no timing against the replaced kernel)
    prepared, ran = [], []

    class Doubling:  # a program step: reads and writes by address, as a primitive does
        scratchpad_bytes = 0

        def run(self, arrays, scratchpad=None):
            ran.append(arrays[0].shape)
            np.multiply(arrays[0].reshape(-1), 2, out=arrays[1].reshape(-1))

    def build():
        program = Program()
        program.add(Doubling(), [("in", 0), ("out", 0)])
        return program

    def prepare(inputs, outputs, params, fallback):
        prepared.append(inputs[0].shape)
        x, out = inputs[0], outputs[0]
        if views == "reshaped":
            x, out = x.reshape(-1), out.reshape(-1)
        elif views == "copied":
            x = x.copy()
        return BoundCall(cache, ("double", inputs[0].shape), {"plain": build}, [x], [out], fallback)

    def kernel(inputs, outputs, params, fallback):
        prepare(inputs, outputs, params, fallback).once()

    kernel.prepare = prepare
    serve = kernels.with_fallback(kernel, lambda xp, inputs, outputs, params: pytest.fail("the program serves"))
    for step in range(4):
        x = np.arange(6, dtype=np.float32).reshape(2, 3) + step  # new arrays every call, as a training step's
        out = np.empty((2, 3), np.float32)
        serve(np, [x], [out], {})
        np.testing.assert_array_equal(out, x * 2)
    assert len(prepared) == (4 if views == "copied" else 1)
    assert len(ran) == 4
