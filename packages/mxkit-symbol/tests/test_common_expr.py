"""The graph pass ``eliminate_common_expr`` against MXNet 1.9.1 (fixtures/common_expr) and
against binds without it (outputs and gradients equal)."""

import importlib.util
import json
import os
import re

import numpy as np
import pytest
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.core.errors import ConfigError
from mxkit.ndarray import array
from mxkit.symbol.passes import configured_passes

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "common_expr")
_spec = importlib.util.spec_from_file_location("common_expr_fixture", os.path.join(HERE, "make_fixture.py"))
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)


def _build_case(name):
    return _cases.build_case(sym, name)


with open(os.path.join(HERE, "common_expr.json")) as _f:
    EXPECTED = json.load(_f)


def _strip_counters(name):
    return re.sub(r"(?<=[a-z])\d+", "", name)


def _bind(symbol, eliminate, grad_req="write"):
    shapes = {n: (2, 3) for n in symbol.list_arguments()}
    with config.override(eliminate_common_expr=eliminate):
        return symbol.simple_bind(None, grad_req=grad_req, **shapes)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_optimized_symbol_matches_mxnet(case):
    symbol = _build_case(case)
    expected = EXPECTED[case]
    assert len(symbol.get_internals()) == expected["internals"]
    optimized = _bind(symbol, True).get_optimized_symbol()
    assert len(optimized.get_internals()) == expected["optimized_internals"]
    assert [_strip_counters(n) for n in optimized.list_outputs()] == expected["optimized_outputs"]
    # off, the graph is the symbol's own
    assert len(_bind(symbol, False).get_optimized_symbol().get_internals()) == expected["internals"]


@pytest.mark.parametrize("case", ["same_sum", "chained", "same_outputs", "same_outputs_chain", "unary"])
@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_results_equal_those_without_the_pass(case, grad_req):
    symbol = _build_case(case)
    rng = np.random.default_rng(3)
    values = {n: rng.uniform(0.5, 1.5, (2, 3)).astype(np.float32) for n in symbol.list_arguments()}
    runs = []
    for eliminate in (False, True):
        exe = _bind(symbol, eliminate, grad_req)
        for grad in exe.grad_arrays:
            grad[:] = 1.0  # 'add' adds onto what is there
        outputs = exe.forward(is_train=True, **values)
        exe.backward([array(np.full((2, 3), 1.0 + i, np.float32)) for i in range(len(outputs))])
        runs.append(([o.asnumpy() for o in outputs], [g.asnumpy() for g in exe.grad_arrays]))
    (out_off, grad_off), (out_on, grad_on) = runs
    for off, on in zip(out_off + grad_off, out_on + grad_on):
        # the same operators on the same values: bit-identical, whatever the sums' order
        np.testing.assert_allclose(on, off, rtol=1e-6)


def test_each_output_keeps_its_own_array():
    exe = _bind(_build_case("same_outputs"), True)
    first, second = exe.forward(a=np.ones((2, 3), np.float32))
    assert first is not second
    second[:] = 0
    np.testing.assert_array_equal(first.asnumpy(), np.full((2, 3), 2.0))


def test_random_and_stateful_nodes_never_merge():
    a = sym.var("a")
    dropout = sym.Dropout(a, p=0.5) + sym.Dropout(a, p=0.5)
    optimized = _bind(dropout, True).get_optimized_symbol()
    assert len(optimized.get_internals()) == len(dropout.get_internals())
    # BatchNorm updates its moving statistics in place: two calls are two updates
    x = sym.var("x")
    gamma, beta, mean, var = (sym.var(n) for n in ("gamma", "beta", "mean", "var"))
    bn = sym.BatchNorm(x, gamma, beta, mean, var, name="bn") + sym.BatchNorm(x, gamma, beta, mean, var, name="bn")
    exe = bn.simple_bind(None, x=(4, 3), grad_req="null")
    assert len(exe.get_optimized_symbol().get_internals()) == len(bn.get_internals())


def test_config_key_turns_the_pass_on_and_off():
    with config.override(eliminate_common_expr=False):
        assert "eliminate_common_expr" not in configured_passes()
    with config.override(eliminate_common_expr=True):
        names = configured_passes()
        assert names.index("eliminate_common_expr") == names.index("prune") + 1


def test_bad_config_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("MXKIT_ELIMINATE_COMMON_EXPR", "sometimes")
    with pytest.raises(ConfigError, match=r"(?i)eliminate_common_expr"):
        config.get("eliminate_common_expr")
    monkeypatch.setenv("MXKIT_ELIMINATE_COMMON_EXPR", "0")
    assert "eliminate_common_expr" not in configured_passes()
