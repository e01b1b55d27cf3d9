"""``group2ctx`` at bind: nodes and arrays placed by ``ctx_group`` (MXNet's model parallelism)."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.context import Context, cpu, gpu
from mxkit.symbol.attribute import AttrScope
from mxkit.symbol.placement import PlacementError, place_nodes

SHAPES = {"x": (3, 4), "w1": (4, 5), "w2": (5, 2)}


def two_stage():
    with AttrScope(ctx_group="stage1"):
        x = sym.Variable("x")
        w1 = sym.Variable("w1")
        h = sym.relu(sym.dot(x, w1))
    with AttrScope(ctx_group="stage2"):
        w2 = sym.Variable("w2")
        out = sym.dot(h, w2) * 2
    return out


def values():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((3, 4)), "w1": rng.standard_normal((4, 5)), "w2": rng.standard_normal((5, 2))}


def run(exe, inputs):
    outputs = exe.forward(is_train=True, **inputs)
    exe.backward(nd.ones(outputs[0].shape, dtype=outputs[0].dtype))
    return outputs[0].asnumpy(), {n: g.asnumpy() for n, g in exe.grad_dict.items()}


def test_arrays_live_on_their_groups_devices_and_results_do_not_change():
    shapes = SHAPES
    types = dict.fromkeys(("x", "w1", "w2"), "float64")
    groups = {"stage1": cpu(1), "stage2": cpu(2)}
    placed = two_stage().simple_bind(cpu(0), type_dict=types, group2ctx=groups, **shapes)
    plain = two_stage().simple_bind(cpu(0), type_dict=types, **shapes)
    assert placed.arg_dict["x"].context == cpu(1) and placed.arg_dict["w1"].context == cpu(1)
    assert placed.arg_dict["w2"].context == cpu(2)
    assert placed.grad_dict["w1"].context == cpu(1) and placed.grad_dict["w2"].context == cpu(2)
    assert placed.outputs[0].context == cpu(2)
    assert plain.outputs[0].context == cpu(0)
    inputs = values()
    out_placed, grads_placed = run(placed, inputs)
    out_plain, grads_plain = run(plain, inputs)
    x, w1, w2 = inputs["x"], inputs["w1"], inputs["w2"]
    hidden = np.maximum(x @ w1, 0)
    np.testing.assert_allclose(out_placed, hidden @ w2 * 2)
    np.testing.assert_array_equal(out_placed, out_plain)
    for name in grads_plain:
        np.testing.assert_array_equal(grads_placed[name], grads_plain[name])


def test_each_node_runs_on_its_groups_device():
    exe = two_stage().simple_bind(cpu(0), group2ctx={"stage1": cpu(1), "stage2": cpu(2)}, **SHAPES)
    graph = exe._graph
    placement = place_nodes(graph, cpu(0), {"stage1": cpu(1), "stage2": cpu(2)},
                            {id(n): a.context for n, a in zip(graph.arg_nodes, exe.arg_arrays)})
    placed = [(n.op.name, placement[id(n)]) for n in graph.forward_nodes]
    assert placed == [("dot", cpu(1)), ("relu", cpu(1)), ("dot", cpu(2)), ("_mul_scalar", cpu(2))]
    # backward nodes run where the node they differentiate ran
    assert placement[id(graph.grad_writers["w1"].node)] == cpu(1)
    assert placement[id(graph.grad_writers["w2"].node)] == cpu(2)
    assert exe._forward_steps[0].ctx == cpu(1) and exe._forward_steps[-1].ctx == cpu(2)
    # a group not in group2ctx runs on the bind's device
    exe = two_stage().simple_bind(cpu(0), group2ctx={"stage2": cpu(3)}, **SHAPES)
    assert exe.arg_dict["x"].context == cpu(0) and exe.arg_dict["w2"].context == cpu(3)


def test_bind_takes_the_devices_of_the_given_arrays():
    inputs = values()
    args = {"x": nd.array(inputs["x"], ctx=cpu(1)), "w1": nd.array(inputs["w1"], ctx=cpu(1)),
            "w2": nd.array(inputs["w2"], ctx=cpu(2))}
    grads = {n: nd.zeros(a.shape, ctx=a.context) for n, a in args.items()}
    exe = two_stage().bind(cpu(0), args, args_grad=grads, group2ctx={"stage1": cpu(1), "stage2": cpu(2)})
    out = exe.forward(is_train=True)[0]
    assert out.context == cpu(2)
    np.testing.assert_allclose(out.asnumpy(), np.maximum(inputs["x"] @ inputs["w1"], 0) @ inputs["w2"] * 2,
                               rtol=1e-5)


def test_bad_group2ctx_is_a_clear_error():
    with pytest.raises(PlacementError, match="dict of ctx_group name to Context"):
        two_stage().simple_bind(cpu(0), group2ctx=[cpu(1)], **SHAPES)
    with pytest.raises(PlacementError, match="maps ctx_group names"):
        two_stage().simple_bind(cpu(0), group2ctx={"stage1": "cpu(1)"}, **SHAPES)
    with pytest.raises(PlacementError, match="share host memory"):
        two_stage().simple_bind(cpu(0), group2ctx={"stage1": gpu(0)}, **SHAPES)
    assert Context("cpu_pinned", 0)  # host devices are accepted
    two_stage().simple_bind(cpu(0), group2ctx={"stage1": Context("cpu_pinned", 0)}, **SHAPES)
