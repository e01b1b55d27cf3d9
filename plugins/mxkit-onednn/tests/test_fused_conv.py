"""oneDNN's ``_FusedConvolution`` (a convolution with an addition and a relu as post-ops) against the generic
kernel in float64, over hypothesis-drawn shapes, strides, pads, dilations and groups.

The bound: each output is a float32 sum of the convolution's K products, the bias and the addend
(K + 2 terms, any order), so within sum_bound(K + 2, magnitude) of the exact value; relu is
1-Lipschitz."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, layout, needs_onednn, sum_bound

pytestmark = needs_onednn
__all__ = ["layout"]  # a fixture


@st.composite
def cases(draw):
    groups = draw(st.sampled_from([1, 2]))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(2))
    stride = tuple(draw(st.integers(1, 2)) for _ in range(2))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(2))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(2))
    spatial = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + draw(st.integers(0, 4)) for k, d, p in zip(kernel, dilate, pad))
    return dict(batch=draw(st.integers(1, 3)), channels=groups * draw(st.integers(1, 3)), groups=groups,
                filters=groups * draw(st.integers(1, 3)), kernel=kernel, stride=stride, dilate=dilate, pad=pad,
                spatial=spatial, no_bias=draw(st.booleans()), act_type=draw(st.sampled_from([None, "relu"])),
                with_sum=draw(st.booleans()), seed=draw(st.integers(0, 2**16)))


def _run(kernel, inputs, params, shape, dtype=np.float32):
    out = np.full(shape, np.nan, dtype)
    kernel(np, inputs, [out], params)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases())
def test_fused_convolution_matches_the_reference(layout, case):
    op = get_registry().get("_FusedConvolution")
    params = op.parse_params(dict(kernel=case["kernel"], stride=case["stride"], dilate=case["dilate"], pad=case["pad"],
                                  num_filter=case["filters"], num_group=case["groups"], no_bias=case["no_bias"],
                                  act_type=case["act_type"], with_sum=case["with_sum"]))
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["batch"], case["channels"], *case["spatial"])).astype(np.float32)
    w = rng.standard_normal((case["filters"], case["channels"] // case["groups"], *case["kernel"])).astype(np.float32)
    inputs = [x, w] + ([] if case["no_bias"] else [rng.standard_normal(case["filters"]).astype(np.float32)])
    (shape,) = op.infer_shape(params, [a.shape for a in inputs] + ([None] if case["with_sum"] else []))
    if case["with_sum"]:
        inputs.append(rng.standard_normal(shape).astype(np.float32))
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    refused = len(PROGRAMS.refusals)
    got = _run(op.kernel_for("numpy"), inputs, params, shape)
    # a program oneDNN cannot offer with post-ops (a gemm convolution takes no binary post-op; a grouped one may
    # want another layout for its result) is refused and the replaced kernel serves; every other is oneDNN's
    if len(PROGRAMS.refusals) == refused:
        assert_served_by_onednn("_FusedConvolution")
    else:
        assert "post-ops" in PROGRAMS.refusals[-1]
    unrelu = dict(params, act_type=None)
    want = _run(op.kernel, [a.astype(np.float64) for a in inputs], params, shape, np.float64)
    magnitude = _run(op.kernel, [np.abs(a).astype(np.float64) for a in inputs], unrelu, shape, np.float64)
    assert_within(got, want, sum_bound(w[0].size + 2, magnitude), "fused convolution")


def test_timing_the_replaced_kernel_which_runs_a_new_convolution_does_not_deadlock():
    """The replaced kernel of ``_FusedConvolution`` (timed as a candidate while the cache chooses) runs the
    convolution's kernel, which meets a key of its own: the cache's choosing lock is re-entrant."""
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    op = get_registry().get("_FusedConvolution")
    params = op.parse_params(dict(kernel=(3, 3), num_filter=4, act_type="relu", with_sum=True, no_bias=True))
    rng = np.random.default_rng(1)
    x, w, r = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 7, 7), (4, 3, 3, 3), (2, 4, 5, 5)))
    results = []
    worker = threading.Thread(target=lambda: results.append(_run(op.kernel_for("numpy"), [x, w, r], params,
                                                                 (2, 4, 5, 5))), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert results, "the first call of a fused convolution did not finish"
    reference = _run(op.kernel, [x.astype(np.float64), w.astype(np.float64), r.astype(np.float64)], params,
                     (2, 4, 5, 5), np.float64)
    magnitude = _run(op.kernel, [np.abs(a).astype(np.float64) for a in (x, w, r)], dict(params, act_type=None),
                     (2, 4, 5, 5), np.float64)
    assert_within(results[0], reference, sum_bound(w[0].size + 2, magnitude), "fused convolution")


def test_the_output_may_be_the_addend(layout):
    """The planner may give the output the addend's storage (the operator declares it in place): oneDNN's
    programs read the addend into the workspace before writing, and the generic kernel convolves into a
    temporary, so both give what separate arrays give."""
    op = get_registry().get("_FusedConvolution")
    params = op.parse_params(dict(kernel=(3, 3), pad=(1, 1), num_filter=4, act_type="relu", with_sum=True))
    rng = np.random.default_rng(2)
    x, w, b, r = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 6, 6), (4, 3, 3, 3), (4,), (2, 4, 6, 6)))
    assert op.inplace(params) == ((3, 0, False),)
    reference = _run(op.kernel, [a.astype(np.float64) for a in (x, w, b, r)], params, r.shape, np.float64)
    magnitude = _run(op.kernel, [np.abs(a).astype(np.float64) for a in (x, w, b, r)], dict(params, act_type=None),
                     r.shape, np.float64)
    for kernel in (op.kernel_for("numpy"), op.kernel):
        shared = r.copy()
        kernel(np, [x, w, b, shared], [shared], params)
        assert_within(shared, reference, sum_bound(w[0].size + 2, magnitude), "in place")
