"""The ``fuse`` graph pass: which nodes it merges, what it must never merge, and that fused
executors compute what unfused ones and numpy compute, forward and backward."""

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.core.errors import ConfigError
from mxkit.ndarray.ops import fused_elemwise

FUSE = ["prune", "fuse"]
PLAIN = ["prune"]


def bind(net, passes, grad_req="write", type_dict=None, **shapes):
    with config.override(graph_passes=passes):
        return net.simple_bind(None, grad_req=grad_req, type_dict=type_dict, **shapes)


def fused_nodes(exe):
    graph = exe._graph
    return [n for n in graph.forward_nodes + graph.backward_nodes if n.op.name == "_FusedElemwise"]


def run(exe, values, head_grads=None):
    for name, value in values.items():
        exe.arg_dict[name][:] = value
    exe.forward(is_train=True)
    outputs = [o.asnumpy() for o in exe.outputs]
    if exe.grad_dict:
        exe.backward([nd.array(g) for g in head_grads] if head_grads is not None else None)
    return outputs, {n: g.asnumpy() for n, g in exe.grad_dict.items()}


def test_a_times_b_plus_1_is_one_node_and_its_intermediate_leaves_the_plan():
    a, b = sym.Variable("a"), sym.Variable("b")
    d = a * b + 1
    fused = bind(d, FUSE, grad_req="null", a=(100,), b=(100,))
    plain = bind(d, PLAIN, grad_req="null", a=(100,), b=(100,))
    assert [n.op.name for n in fused._graph.forward_nodes] == ["_FusedElemwise"]
    assert len(plain._graph.forward_nodes) == 2
    # the product a*b had 400 planned bytes; the fused graph plans nothing
    assert plain.memory_plan.total_bytes == 400 and fused.memory_plan.total_bytes == 0
    values = {"a": np.arange(100, dtype="float32"), "b": np.full(100, 0.5, dtype="float32")}
    (out,), _ = run(fused, values)
    np.testing.assert_array_equal(out, values["a"] * values["b"] + 1)
    assert fused.output_dict.keys() == plain.output_dict.keys()
    assert "a*b" not in fused.debug_str() and "_FusedElemwise" in fused.debug_str()


def test_an_entry_read_twice_or_asked_for_is_never_fused_away():
    a, b = sym.Variable("a"), sym.Variable("b")
    shared = a * b
    net = sym.Group([sym.exp(shared) + 1, sym.tanh(shared) * 2])
    exe = bind(net, FUSE, grad_req="null", a=(3,), b=(3,))
    producers = [n for n in exe._graph.forward_nodes if n.op.name != "_FusedElemwise"]
    assert [n.op.name for n in producers] == ["elemwise_mul"]   # read by two groups: stays a node of its own
    assert len(fused_nodes(exe)) == 2
    inner = a * b
    asked = sym.Group([inner, inner + 1])
    exe = bind(asked, FUSE, grad_req="null", a=(3,), b=(3,))
    assert fused_nodes(exe) == []   # the product is an output, so it must be materialised


def test_forward_results_the_backward_reads_are_kept():
    x, w = sym.Variable("x"), sym.Variable("w")
    y = sym.sigmoid(x * w)          # backward of sigmoid reads y; backward of mul reads x and w
    exe = bind(sym.tanh(y) * 3, FUSE, x=(4,), w=(4,))
    forward_groups = [n for n in exe._graph.forward_nodes if n.op.name == "_FusedElemwise"]
    readers = {id(e.node) for n in exe._graph.backward_nodes for e in n.inputs}
    for group in forward_groups:
        members = group.params["nodes"].split(",")
        assert not any(m == "sigmoid0" for m in members[:-1]), "an intermediate read by backward was fused away"
    assert any(id(n) in readers for n in exe._graph.forward_nodes)


def test_forward_and_backward_nodes_never_share_a_group():
    x = sym.Variable("x")
    net = sym.tanh(sym.exp(x * 2)) + 1
    exe = bind(net, FUSE, x=(5,))
    forward_names = {n.name for n in bind(net, PLAIN, x=(5,))._graph.forward_nodes}
    groups = [set(node.params["nodes"].split(",")) for node in fused_nodes(exe)]
    assert len(groups) >= 2
    for members in groups:
        assert members <= forward_names or not (members & forward_names), members


def test_backward_is_fused_too_and_gradients_match():
    a, b = sym.Variable("a"), sym.Variable("b")
    net = sym.Activation(a * b + 1, act_type="sigmoid") * b - sym.tanh(a)
    rng = np.random.default_rng(0)
    values = {"a": rng.normal(size=(4, 5)).astype("float32"), "b": rng.normal(size=(4, 5)).astype("float32")}
    head = [rng.normal(size=(4, 5)).astype("float32")]
    fused = bind(net, FUSE, a=(4, 5), b=(4, 5))
    plain = bind(net, PLAIN, a=(4, 5), b=(4, 5))
    assert len(fused._backward_steps) < len(plain._backward_steps) // 2
    assert fused.memory_plan.total_bytes < plain.memory_plan.total_bytes
    (out_f,), grads_f = run(fused, values, head)
    (out_p,), grads_p = run(plain, values, head)
    # Tolerances from the terms' magnitudes, not from one machine: the two graphs use
    # different float32 sigmoid and tanh (the CPU plugin's, <= 3 ulp; numpy's, a few ulp
    # and SIMD-path dependent: 4 taken) and round their few other operations in another
    # order. Each term t of a sum then differs by at most ~(3 + 4 + 8 operations) * 2**-24
    # * |t|: the bound of an element is that times the sum of its terms' magnitudes (an
    # element that cancels to near zero keeps the absolute error of its terms).
    unit = (3 + 4 + 8) * 2.0**-24
    x, y, h = (v.astype(np.float64) for v in (values["a"], values["b"], head[0]))
    sig = 1 / (1 + np.exp(-(x * y + 1)))
    th = np.tanh(x)
    assert (np.abs(out_f - out_p) <= unit * (np.abs(sig * y) + np.abs(th))).all()
    dsig = sig * (1 - sig)
    terms = {"a": np.abs(dsig * y * y * h) + np.abs((1 - th**2) * h),
             "b": np.abs(dsig * x * y * h) + np.abs(sig * h)}
    for name in values:
        assert (np.abs(grads_f[name] - grads_p[name]) <= unit * terms[name]).all(), name


def test_integer_graphs_and_non_elementwise_operators_stay_unfused():
    a, b = sym.Variable("a"), sym.Variable("b")
    exe = bind(a * b + 1, FUSE, grad_req="null", type_dict={"a": "int32", "b": "int32"}, a=(3,), b=(3,))
    assert fused_nodes(exe) == []
    exe = bind(sym.sum(a * b, axis=0) + 1, FUSE, grad_req="null", a=(3, 2), b=(3, 2))
    assert fused_nodes(exe) == []   # the sum sits between the two elementwise nodes


def test_a_broadcast_gradient_reduction_is_not_mistaken_for_a_copy():
    a, b = sym.Variable("a"), sym.Variable("b")
    net = sym.broadcast_mul(a, b) + 1          # a: (3, 4), b: (1, 4): b's gradient is summed over rows
    rng = np.random.default_rng(1)
    values = {"a": rng.normal(size=(3, 4)).astype("float32"), "b": rng.normal(size=(1, 4)).astype("float32")}
    head = [np.ones((3, 4), dtype="float32")]
    _, grads = run(bind(net, FUSE, a=(3, 4), b=(1, 4)), values, head)
    np.testing.assert_allclose(grads["b"], values["a"].sum(axis=0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(grads["a"], np.broadcast_to(values["b"], (3, 4)), rtol=1e-6)


def test_fuse_is_a_real_pass_now_and_mirror_is_too():
    from mxkit.symbol import passes

    assert "fuse" not in passes._PLANNED and "mirror" not in passes._PLANNED
    assert "fuse" in config.option_table().specs["graph_passes"].default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bind(sym.Variable("a") * 2 + 1, FUSE, grad_req="null", a=(2,))
    with config.override(graph_passes=["prune", "fusion"]), pytest.raises(ConfigError, match=r"'fusion'.*fuse"):
        (sym.Variable("a") * 2).simple_bind(None, a=(2,))


def test_layer_norm_like_chain_with_broadcast_statistics():
    x = sym.Variable("x")
    mean = sym.mean(x, axis=1, keepdims=True)
    centred = sym.broadcast_sub(x, mean)
    var = sym.mean(centred * centred, axis=1, keepdims=True)
    net = sym.broadcast_div(centred, sym.sqrt(var + 1e-5)) * 2 + 0.5
    rng = np.random.default_rng(2)
    values = {"x": rng.normal(size=(6, 8)).astype("float32")}
    fused = bind(net, FUSE, x=(6, 8))
    assert fused_nodes(fused)
    (out,), grads = run(fused, values, [np.ones((6, 8), dtype="float32")])
    xv = values["x"].astype("float64")
    reference = (xv - xv.mean(1, keepdims=True)) / np.sqrt(xv.var(1, keepdims=True) + 1e-5) * 2 + 0.5
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)
    (_,), grads_plain = run(bind(net, PLAIN, x=(6, 8)), values, [np.ones((6, 8), dtype="float32")])
    np.testing.assert_allclose(grads["x"], grads_plain["x"], rtol=1e-4, atol=1e-5)


# ---- property: random elementwise graphs ---------------------------------------------------

SHAPES = {"a": (3, 4), "b": (1, 4), "c": (3, 1)}

# name: (arity, symbol builder, numpy reference)
OPS = {
    "add": (2, sym.broadcast_add, np.add),
    "sub": (2, sym.broadcast_sub, np.subtract),
    "mul": (2, sym.broadcast_mul, np.multiply),
    "max": (2, sym.broadcast_maximum, np.maximum),
    "min": (2, sym.broadcast_minimum, np.minimum),
    "greater": (2, sym.broadcast_greater, lambda p, q: (p > q).astype(p.dtype)),
    "relu": (1, lambda s: sym.Activation(s, act_type="relu"), lambda p: np.maximum(p, 0)),
    "sigmoid": (1, sym.sigmoid, lambda p: 1 / (1 + np.exp(-p))),
    "tanh": (1, sym.tanh, np.tanh),
    "softsign": (1, lambda s: sym.Activation(s, act_type="softsign"), lambda p: p / (1 + np.abs(p))),
    "softrelu": (1, lambda s: sym.Activation(s, act_type="softrelu"), lambda p: np.logaddexp(0, p)),
    "abs": (1, sym.abs, np.abs),
    "neg": (1, sym.negative, np.negative),
    "square": (1, sym.square, np.square),
    "scale": (1, lambda s: s * 0.5, lambda p: p * 0.5),
    "shift": (1, lambda s: 1.5 - s, lambda p: 1.5 - p),
    "plus": (1, lambda s: s + 0.25, lambda p: p + 0.25),
    "clip": (1, lambda s: sym.clip(s, a_min=-0.75, a_max=0.5), lambda p: np.clip(p, -0.75, 0.5)),
    "leaky": (1, lambda s: sym.LeakyReLU(s, act_type="leaky", slope=0.1), lambda p: np.where(p > 0, p, 0.1 * p)),
}

graphs = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 20), st.integers(0, 20)),
                  min_size=2, max_size=7)


def _random_graph(program, extra_head):
    """Symbols and a numpy evaluator of the same random DAG (values may be read several times)."""
    symbols = [sym.Variable(n) for n in SHAPES]
    steps = []
    for name, i, j in program:
        arity, build, _ = OPS[name]
        picks = (i % len(symbols), j % len(symbols))[:arity]
        symbols.append(build(*(symbols[p] for p in picks)))
        steps.append((name, picks))
    heads = [symbols[-1]]
    if extra_head % 3 == 0 and len(symbols) > 4:
        heads.append(symbols[3 + extra_head % (len(symbols) - 4)])   # an intermediate the user asks for

    def evaluate(values):
        computed = [values.get(n, np.zeros(SHAPES[n])) for n in SHAPES]   # an unused input is no argument
        for name, picks in steps:
            computed.append(OPS[name][2](*(computed[p] for p in picks)))
        # by identity: Symbol == builds a comparison node, as in MXNet
        return [computed[next(i for i, s in enumerate(symbols) if s is h)] for h in heads]

    return sym.Group(heads) if len(heads) > 1 else heads[0], evaluate


@pytest.mark.parametrize("grad_req", ["write", "null"], ids=["training", "inference"])
@pytest.mark.parametrize("use_numexpr", [True, False], ids=["numexpr", "ufuncs"])
@settings(max_examples=25, deadline=None)
@given(graphs, st.integers(0, 100), st.integers(0, 2**31 - 1))
def test_random_elementwise_graphs_fused_equal_unfused_and_numpy(use_numexpr, grad_req, program, extra_head, seed):
    # training keeps the forward results backward reads (so mostly backward fuses); inference
    # fuses whole forward chains
    net, evaluate = _random_graph(program, extra_head)
    arguments = net.list_arguments()
    rng = np.random.default_rng(seed)
    values = {n: rng.uniform(-2, 2, SHAPES[n]).astype("float32") for n in arguments}
    shapes = {n: SHAPES[n] for n in arguments}
    with fused_elemwise.use_numexpr(use_numexpr):
        fused = bind(net, FUSE, grad_req=grad_req, **shapes)
        plain = bind(net, PLAIN, grad_req=grad_req, **shapes)
        head_grads = [rng.normal(size=o.shape).astype("float32") for o in plain.outputs]
        outs_f, grads_f = run(fused, values, head_grads)
        outs_p, grads_p = run(plain, values, head_grads)
    assert len(fused._forward_steps) <= len(plain._forward_steps)
    assert fused.memory_plan.total_bytes <= plain.memory_plan.total_bytes
    with np.errstate(all="ignore"):
        expected = evaluate({n: v.astype("float64") for n, v in values.items()})
    for got, same, want in zip(outs_f, outs_p, expected):
        np.testing.assert_allclose(got, same, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), rtol=1e-4, atol=1e-5)
    assert grads_f.keys() == grads_p.keys()
    for name in grads_p:
        np.testing.assert_allclose(grads_f[name], grads_p[name], rtol=1e-5, atol=1e-5)


def test_sym_fuse_returns_the_fused_graph_for_inspection_and_it_round_trips_through_json():
    a, b = sym.Variable("a"), sym.Variable("b")
    net = sym.Activation(a * b + 1, act_type="relu")
    fused = sym.fuse(net, a=(3,), b=(3,))
    assert fused.list_arguments() == ["a", "b"] and fused.list_outputs() == net.list_outputs()
    assert '"op": "_FusedElemwise"' in fused.tojson()
    again = sym.load_json(fused.tojson())
    values = {"a": np.array([1.0, 2.0, -3.0], dtype="float32"), "b": np.ones(3, dtype="float32")}
    for candidate in (fused, again):
        (out,), _ = run(bind(candidate, PLAIN, grad_req="null", a=(3,), b=(3,)), values)
        np.testing.assert_array_equal(out, [2.0, 3.0, 0.0])
    from mxkit.symbol.autodiff import GradientError

    with pytest.raises(GradientError, match=r"_FusedElemwise.*has no gradient"):
        bind(fused, PLAIN, a=(3,), b=(3,))


def test_debug_str_shows_each_fused_expression():
    a, b = sym.Variable("a"), sym.Variable("b")
    text = bind(a * b + 1, FUSE, grad_req="null", a=(4,), b=(4,)).debug_str()
    assert re.search(r"Op:_FusedElemwise, Name=_plusscalar\d+\nFused: \(\(a \* b\) \+ 1\.0f\)  "
                     r"\[_mul\d+, _plusscalar\d+\]", text), text


def test_symbol_optimize_is_sym_fuse():
    a, b = sym.Variable("a"), sym.Variable("b")
    net = sym.Activation(a * b + 1, act_type="relu", name="out") * a
    optimized = net.optimize(a=(3,), b=(3,))
    assert optimized.tojson() == sym.fuse(net, a=(3,), b=(3,)).tojson()
    ops = [n["op"] for n in __import__("json").loads(optimized.tojson())["nodes"]]
    assert ops == ["null", "null", "_FusedElemwise"]   # a*b+1, relu and *a: one node
    values = {"a": np.array([1.0, 2.0, -3.0], dtype="float32"), "b": np.array([2.0, -1.0, 1.0], dtype="float32")}
    (out,), _ = run(bind(optimized, PLAIN, grad_req="null", a=(3,), b=(3,)), values)
    np.testing.assert_array_equal(out, np.maximum(values["a"] * values["b"] + 1, 0) * values["a"])
    float64 = net.optimize(type_dict={"a": "float64", "b": "float64"}, a=(3,), b=(3,))
    assert '\\"dtype\\":\\"float64\\"' in float64.tojson() and "float32" not in float64.tojson()
    from mxkit.core.errors import ShapeError

    with pytest.raises(ShapeError, match=r"cannot infer the shapes of a, fc_weight.*a=\(\.\.\.\)"):
        sym.FullyConnected(a, num_hidden=3, name="fc").optimize()   # fusion needs every shape


def test_a_gradient_sum_over_interleaved_producers_does_not_grow_the_plan():
    # found by the property above: fusing a + b + c + d, where the backward nodes making c and
    # d run after a + b, held all four terms at once (192 bytes against 144 unfused)
    net, _ = _random_graph([("max", 0, 0), ("max", 0, 0)], 0)
    fused = bind(net, FUSE, grad_req="write", a=SHAPES["a"])
    plain = bind(net, PLAIN, grad_req="write", a=SHAPES["a"])
    assert fused.memory_plan.total_bytes <= plain.memory_plan.total_bytes
    assert fused_nodes(fused)  # the later terms still fuse


def test_a_stopped_chain_is_fused_with_its_blockgrad_and_costs_no_more_memory():
    # MXNet shares BlockGrad's output with its input; fused into the chain, the stopped result is
    # written once, into the output: the bind needs what grad_req='null' needs
    from mxkit import mx

    data = mx.sym.var("data")
    chain = data
    for _ in range(4):
        chain = chain * chain

    def total(symbol, **kwargs):
        exe = symbol.simple_bind(mx.cpu(), data=(8, 64, 256), **kwargs)
        return int(re.search(r"Total (\d+) MB allocated", exe.debug_str()).group(1)), exe

    inference, _ = total(chain, grad_req="null")
    stopped, exe = total(mx.sym.stop_gradient(chain))
    training, _ = total(chain)
    assert stopped == inference < training
    x = np.random.default_rng(0).uniform(0.9, 1.1, (8, 64, 256)).astype(np.float32)
    out = exe.forward(is_train=True, data=x)[0].asnumpy()
    np.testing.assert_allclose(out, x.astype(np.float64) ** 16, rtol=1e-5)
    exe.backward(mx.nd.ones(out.shape))
    assert not exe.grad_dict["data"].asnumpy().any()
