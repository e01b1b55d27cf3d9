"""The extension's dispatch helpers: ``float32_call_signature`` (``kernels.call_signature``) against the
signature worked out here from numpy's own flags, and ``run_steps`` against a program's Python loop, to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from onednn_harness import needs_onednn, run

pytestmark = needs_onednn

PARAMS = dict(kernel=(3, 3), num_filter=8, pad=(1, 1), no_bias=True)


def _arrays():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 8)).astype(np.float32)
    return {
        "float32": base,
        "float32 0-d": np.array(2.0, np.float32),
        "float32 empty": np.empty((0, 3), np.float32),
        "float32 rows": base[1:4],  # C-contiguous view
        "float32 columns": base[:, 1:4],  # not contiguous
        "float32 Fortran": np.asfortranarray(base),
        "float32 byte-swapped": base.astype(">f4"),
        "float64": base.astype(np.float64),
        "float16": base.astype(np.float16),
        "subclass": base.view(np.matrix),
        "list": [1.0, 2.0],
    }


@pytest.mark.parametrize("first", list(_arrays()))
@pytest.mark.parametrize("second", ["float32", "float32 columns", "float64", "float32 empty"])
@pytest.mark.parametrize("params", [{}, {"num_hidden": 4, "no_bias": False}, {"scalar": -0.0}, {"axes": [1, 2]}])
def test_the_signature_names_float32_c_contiguous_calls_by_shapes_and_parameters(first, second, params):
    from mxkit_onednn.kernels import call_signature

    arrays = _arrays()
    inputs, outputs = [arrays[first]], [arrays[second]]
    native_float32 = np.dtype("=f4")
    plain = all(type(a) is np.ndarray and a.dtype == native_float32 and a.dtype.isnative and a.flags["C_CONTIGUOUS"]
                for a in inputs + outputs)
    hashable = all(not isinstance(value, list) for value in params.values())
    expected = ((arrays[first].shape, arrays[second].shape, 1), tuple(params.items())) if plain and hashable else None
    assert call_signature(inputs, outputs, params) == expected
    if expected is not None:
        assert hash(call_signature(inputs, outputs, params)) == hash(expected)


def test_the_compiled_loop_runs_a_program_as_the_python_loop(monkeypatch):
    from mxkit_onednn import program

    cache = program.ProgramCache()
    cache.only = "blocked"  # operands reordered into the workspace: refs of all three kinds
    monkeypatch.setattr(program, "PROGRAMS", cache)
    monkeypatch.setattr("mxkit_onednn.conv.PROGRAMS", cache)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 9, 9)).astype(np.float32)
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    run("Convolution", [x, w], **PARAMS)
    (_, built), = cache._programs.items()
    kinds = {ref[0] for _, refs in built.steps for ref in refs}
    if "ws" not in kinds:
        pytest.skip("oneDNN chose numpy's layout here: no workspace slot to bind")
    assert program._compiled["run_steps"] is not None
    compiled = np.full((2, 8, 9, 9), np.nan, np.float32)
    built.run([x, w], [compiled])
    monkeypatch.setitem(program._compiled, "run_steps", None)
    looped = np.full((2, 8, 9, 9), np.nan, np.float32)
    built.run([x, w], [looped])
    np.testing.assert_array_equal(compiled, looped)
    assert np.isfinite(compiled).all()


def test_the_compiled_loop_refuses_a_workspace_slot_outside_the_workspace():
    from mxkit_onednn import program
    from mxkit_onednn.library import load

    dnnl = load()
    flat = dnnl.plain_md((16,))
    b = program.Builder(dnnl)
    b.step(dnnl.eltwise_forward_pd(dnnl.FORWARD_INFERENCE, dnnl.ELTWISE_RELU_USE_DST, flat, flat, 0.0, 0.0),
           [(dnnl.ARG_SRC, flat, ("in", 0)), (dnnl.ARG_DST, flat, ("out", 0))])
    built = b.build()
    (primitive, _), = built.steps
    x, out = np.arange(-8, 8, dtype=np.float32), np.zeros(16, np.float32)
    workspace = np.zeros(128, np.uint8)
    for bad in (("ws", 96, 64), ("ws", 0, 32), ("ws", -64, 64)):  # past the end, too small, before the start
        with pytest.raises(ValueError, match="workspace slot"):
            dnnl.run_steps([(primitive, [("in", 0), bad])], [x], [out], workspace, None, program._resolve)
    with pytest.raises(ValueError, match="takes 2 arrays"):
        dnnl.run_steps([(primitive, [("in", 0)])], [x], [out], workspace, None, program._resolve)
    with pytest.raises(ValueError, match="C-contiguous"):
        dnnl.run_steps([(primitive, [("in", 0), ("out", 0)])], [x[::2]], [out], workspace, None, program._resolve)
    dnnl.run_steps([(primitive, [("in", 0), ("ws", 64, 64)])], [x], [out], workspace, None, program._resolve)
    np.testing.assert_array_equal(workspace[64:].view(np.float32), np.maximum(x, 0))
