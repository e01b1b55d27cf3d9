"""The operators of packages/mxkit-ndarray/tests/fixtures/mxnet_ops (linalg, CTCLoss, the spatial
transformer family, Correlation, the interleaved attention products, ...) as symbols: outputs and
input gradients of a bound executor against the same MXNet 1.9.1 fixtures and tolerances as the
NDArray test, so shape and dtype inference, the graph's gradient and the executor agree with MXNet."""

from __future__ import annotations

import os
import sys

import pytest
from mxkit import mx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "packages", "mxkit-ndarray",
                                "tests", "fixtures", "mxnet_ops"))

import mxnet_ops_cases as cases


# the Symbol form of histogram with a count of bins needs a range (there is no data to read)
def _has_symbol_form(case):
    spec = cases.load(case)[0]
    return not (spec["op"] == "histogram" and "bins" in spec["params"] and "range" not in spec["params"])


SYMBOL_CASES = [c for c in cases.CASES if _has_symbol_form(c)]


def _function(op):
    fn = mx.sym
    for part in op.split("."):
        fn = getattr(fn, part)
    return fn


@pytest.mark.parametrize("case", cases.parametrized(SYMBOL_CASES))
def test_executor_matches_mxnet(case):
    spec, params, inputs, heads = cases.load(case)
    names = [f"in{i}" for i in range(len(inputs))]
    sym = _function(spec["op"])(*[mx.sym.Variable(n) for n in names], **params)
    args = {n: mx.nd.array(x, dtype=x.dtype) for n, x in zip(names, inputs)}
    differentiated = spec["differentiated"] if heads else []
    grads = {names[i]: mx.nd.zeros(inputs[i].shape, dtype=inputs[i].dtype) for i in differentiated}
    grad_req = {n: ("write" if n in grads else "null") for n in names}
    executor = sym.bind(mx.cpu(), args, args_grad=grads, grad_req=grad_req)
    outputs = [o.asnumpy() for o in executor.forward(is_train=bool(heads))]
    if heads:
        executor.backward([mx.nd.array(h, dtype=h.dtype) for h in heads])
    cases.check(case, spec, outputs, {i: grads[names[i]].asnumpy() for i in differentiated})
