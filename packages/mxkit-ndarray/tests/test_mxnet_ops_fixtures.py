"""linalg, CTCLoss, the spatial transformer family, Correlation, the interleaved attention products,
depth_to_space / space_to_depth, batch_take, index_copy, moments and histogram against MXNet 1.9.1:
forward outputs and input gradients through ``mxkit.ndarray``'s public operator functions, from the
fixtures written by fixtures/mxnet_ops/make_mxnet_ops_fixtures.py (the other test files of these
operators check them against numpy and finite differences; this one checks MXNet's conventions).
The tolerances and their derivation are in fixtures/mxnet_ops/mxnet_ops_cases.py."""

from __future__ import annotations

import json
import os
import sys

import mxkit.ndarray as nd
import pytest
from mxkit.ndarray import autograd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_ops"))

import mxnet_ops_cases as cases


def _function(op):
    fn = nd
    for part in op.split("."):
        fn = getattr(fn, part)
    return fn


def _forward_backward(spec, params, inputs, heads):
    arrays = [nd.array(x, dtype=x.dtype) for x in inputs]
    for i in spec["differentiated"]:
        arrays[i].attach_grad()
    with autograd.record():
        outputs = _function(spec["op"])(*arrays, **params)
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if heads:
        autograd.backward(outputs, [nd.array(h, dtype=h.dtype) for h in heads])
    return [o.asnumpy() for o in outputs], {i: arrays[i].grad.asnumpy() for i in spec["differentiated"]}


def test_every_operator_has_fixtures():
    ops = {json.loads(str(cases.FIXTURES[f"{c}/spec"]))["op"] for c in cases.CASES}
    for op in ("gemm", "gemm2", "potrf", "potri", "trmm", "trsm", "sumlogdiag", "syrk", "gelqf", "syevd",
               "inverse", "det", "slogdet", "extractdiag", "makediag", "extracttrian", "maketrian"):
        assert f"linalg.{op}" in ops
    for op in ("CTCLoss", "GridGenerator", "BilinearSampler", "SpatialTransformer", "Correlation",
               "contrib.interleaved_matmul_selfatt_qk", "contrib.interleaved_matmul_selfatt_valatt",
               "contrib.interleaved_matmul_encdec_qk", "contrib.interleaved_matmul_encdec_valatt",
               "depth_to_space", "space_to_depth", "batch_take", "contrib.index_copy", "moments", "histogram"):
        assert op in ops


@pytest.mark.parametrize("case", cases.parametrized(cases.CASES))
def test_matches_mxnet(case):
    spec, params, inputs, heads = cases.load(case)
    outputs, grads = _forward_backward(spec, params, inputs, heads)
    cases.check(case, spec, outputs, grads)
