"""Fused elementwise nodes on the GPU: each program compiles to one CuPy ElementwiseKernel that
matches the CPU's fused kernel, and a fused graph trains to the CPU's results."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mxkit.core import cpu, gpu
from mxkit.ndarray import array
from mxkit.ndarray.invoke import invoke_by_name
from mxkit.ndarray.ops._fused_program import PRIMITIVES

pytestmark = pytest.mark.gpu
# primitives fed a transformed input so that each sees its domain
_DOMAIN = {"power": ["abs"], "log": ["abs"], "log10": ["abs"], "log2": ["abs"], "log1p": ["abs"], "sqrt": ["abs"],
           "arccosh": ["abs", "plus1"], "arcsin": ["third"], "arccos": ["third"], "arctanh": ["third"]}


def _primitive_program(name: str, dtype: str) -> str:
    steps, operand = [], "x0"
    for prepare in _DOMAIN.get(name, []):
        steps.append({"abs": ["abs", operand], "plus1": ["add", operand, 1.0], "third": ["div", operand, 3.0]}[prepare])
        operand = f"v{len(steps) - 1}"
    if name == "clip":
        steps.append(["clip", operand, -0.5, 0.75])
    else:
        steps.append([name, operand, *["x1", "x2"][:PRIMITIVES[name].arity - 1]])
    steps.append(["mul", f"v{len(steps) - 1}", 1.5])  # a chain, not a single call
    return json.dumps({"dtype": dtype, "num_inputs": 3, "steps": steps})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_each_primitive_compiles_and_matches_the_cpu(name, dtype):
    rng = np.random.default_rng(3)
    values = [rng.uniform(-2, 2, (6, 7)).astype(dtype), rng.uniform(-2, 2, (1, 7)).astype(dtype),
              rng.uniform(-2, 2, (6, 1)).astype(dtype)]
    values[0][0, :3] = values[1][0, :3]  # some equal pairs for the comparisons
    expression = _primitive_program(name, dtype)
    want = invoke_by_name("_FusedElemwise", *[array(v, ctx=cpu(0), dtype=dtype) for v in values],
                          expression=expression).asnumpy()
    got = invoke_by_name("_FusedElemwise", *[array(v, ctx=gpu(0), dtype=dtype) for v in values],
                         expression=expression).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6, equal_nan=True)


def test_one_kernel_per_program_is_compiled_and_cached():
    from mxkit_cuda.fused import compiled_kernel

    expression = json.dumps({"dtype": "float32", "num_inputs": 2, "steps": [["mul", "x0", "x1"], ["add", "v0", 1.0]]})
    assert compiled_kernel(expression) is compiled_kernel(expression)
    a = array(np.full((3, 4), 2.0, np.float32), ctx=gpu(0))
    b = array(np.full((3, 4), 5.0, np.float32), ctx=gpu(0))
    out = invoke_by_name("_FusedElemwise", a, b, expression=expression)
    np.testing.assert_array_equal(out.asnumpy(), np.full((3, 4), 11.0))


def test_a_fused_graph_gives_the_cpu_forward_and_gradients():
    symbol = pytest.importorskip("mxkit.symbol")
    a, b, c = symbol.Variable("a"), symbol.Variable("b"), symbol.Variable("c")
    net = symbol.tanh(a * b + 1) * symbol.sigmoid(c) - symbol.relu(a - c) / 2
    rng = np.random.default_rng(5)
    values = {n: rng.standard_normal((64, 33)).astype(np.float32) for n in "abc"}
    head = rng.standard_normal((64, 33)).astype(np.float32)
    results = {}
    for ctx in (cpu(0), gpu(0)):
        exe = net.simple_bind(ctx=ctx, a=(64, 33), b=(64, 33), c=(64, 33))
        fused = [n for n in exe._graph.forward_nodes + exe._graph.backward_nodes if n.op.name == "_FusedElemwise"]
        assert fused, "the fuse pass made no fused node"
        for name, value in values.items():
            exe.arg_dict[name][:] = value
        exe.forward(is_train=True)
        exe.backward(array(head, ctx=ctx))
        results[str(ctx)] = [exe.outputs[0].asnumpy()] + [exe.grad_dict[n].asnumpy() for n in "abc"]
    for got, want in zip(results["gpu(0)"], results["cpu(0)"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
