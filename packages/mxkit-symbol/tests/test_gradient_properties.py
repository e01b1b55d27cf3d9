"""Property tests: gradients of random compositions against finite differences, and the
executor's refusal of an illegal memory plan."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import ndarray as nd
from mxkit import symbol as sym

UNARY = {
    "tanh": sym.tanh, "sigmoid": sym.sigmoid, "square": sym.square, "sin": sym.sin,
    "scale": lambda s: s * 0.7, "shift": lambda s: 1.5 - s,
    "softrelu": lambda s: sym.Activation(s, act_type="softrelu"),
}
BINARY = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
    "bmul": lambda a, b: sym.broadcast_mul(a, sym.sum(b, axis=1, keepdims=True)),
}

programs = st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)), st.integers(0, 10), st.integers(0, 10)),
                    min_size=1, max_size=6)


def _build(program):
    """A random DAG: each step applies an op to earlier values (so values are reused)."""
    values = [sym.Variable("x"), sym.Variable("y")]
    for name, i, j in program:
        a, b = values[i % len(values)], values[j % len(values)]
        values.append(UNARY[name](a) if name in UNARY else BINARY[name](a, b))
    return sym.sum(values[-1] * values[-1], axis=(0, 1)) + sym.sum(values[len(values) // 2], axis=(0, 1))


@settings(max_examples=20, deadline=None)
@given(programs, st.integers(0, 2**31 - 1))
def test_random_graph_gradients_match_finite_differences(program, seed):
    net = _build(program)
    rng = np.random.default_rng(seed)
    values = {"x": rng.uniform(-1, 1, (2, 3)), "y": rng.uniform(-1, 1, (2, 3))}
    arguments = net.list_arguments()
    reqs = {n: ("write" if n in arguments else "null") for n in arguments}
    exe = net.simple_bind(None, grad_req=reqs, type_dict=dict.fromkeys(arguments, "float64"),
                          **{n: values[n].shape for n in arguments})
    for name in arguments:
        exe.arg_dict[name][:] = values[name]
    exe.forward(is_train=True)
    exe.backward(nd.ones((1,), dtype="float64"))
    probe = net.simple_bind(None, grad_req="null", type_dict=dict.fromkeys(arguments, "float64"),
                            **{n: values[n].shape for n in arguments})

    def objective(name, array):
        inputs = dict(values, **{name: array})
        return float(probe.forward(**{n: inputs[n] for n in arguments})[0].asnumpy()[0])

    eps = 1e-6
    for name in arguments:
        numeric = np.zeros_like(values[name])
        for index in np.ndindex(values[name].shape):
            plus, minus = values[name].copy(), values[name].copy()
            plus[index] += eps
            minus[index] -= eps
            numeric[index] = (objective(name, plus) - objective(name, minus)) / (2 * eps)
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), numeric, rtol=1e-4, atol=1e-6, err_msg=name)


def test_bind_refuses_an_illegal_memory_plan(monkeypatch):
    """Every bind verifies its plan: a planner that overlaps live entries is caught."""
    import dataclasses

    import mxkit.memplan as memplan
    from mxkit.memplan import PlanError, Pool, Storage

    real = memplan.plan_memory

    def overlapping(graph, strategy=None, **options):
        plan = real(graph, "none")
        storage = {name: Storage(pool=0, offset=0) for name in plan.storage}
        pools = (Pool(id=0, device=plan.pools[0].device, size=max(p.size for p in plan.pools)),)
        return dataclasses.replace(plan, storage=storage, pools=pools, inplace={})

    monkeypatch.setattr(memplan, "plan_memory", overlapping)
    x = sym.Variable("x")
    net = sym.tanh(x) * sym.sigmoid(x) + sym.square(x)
    with pytest.raises(PlanError):
        net.simple_bind(None, x=(4, 4))
