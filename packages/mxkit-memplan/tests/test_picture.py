"""MemoryPlan.plot: the numbers drawn are the plan's, the PNG is real, and a missing matplotlib is explained."""

import sys

import pytest
from mxkit.core.errors import MissingComponentError
from mxkit.memplan import Entry, Graph, Node, PlanError, plan_memory
from mxkit.memplan.picture import byte_unit, memory_picture
from mxkit.memplan.synthetic import residual_stack, with_backward

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def three_step_graph():
    """x -> a (100 B) -> b (200 B) -> c (50 B, requested); by hand: live = 100, 300, 250 (no in-place)."""
    entries = [Entry("x", 10, external=True), Entry("a", 100), Entry("b", 200), Entry("c", 50, external=True)]
    nodes = [Node("f", ("x",), ("a",)), Node("g", ("a",), ("b",)), Node("h", ("b",), ("c",))]
    return Graph(nodes, entries)


def test_the_curve_is_the_hand_computed_live_bytes_and_the_lines_are_each_plans_total():
    graph = three_step_graph()
    mxnet, none = plan_memory(graph, "mxnet"), plan_memory(graph, "none")
    picture = memory_picture(mxnet, graph=graph, compare=[none])
    assert picture.live_bytes == (100, 300, 200)  # step h reads b (200) and writes external c
    assert picture.steps == (0, 1, 2)
    assert picture.lower_bound_bytes == 300
    assert [(a.strategy, a.total_bytes) for a in picture.arenas] == [("mxnet", mxnet.total_bytes), ("none", 300)]
    assert picture.step_names == ("f", "g", "h")
    assert picture.peak_step == 1
    assert picture.other_curves == ()  # same graph, same curve


def test_a_plan_of_a_longer_graph_brings_its_own_curve():
    graph = three_step_graph()
    longer = with_backward(residual_stack(1))
    picture = memory_picture(plan_memory(graph, "mxnet"), compare=plan_memory(longer, "greedy"))
    (strategy, curve), = picture.other_curves
    assert strategy == "greedy" and len(curve) == longer.num_steps


@pytest.mark.parametrize("largest, unit", [(0, "B"), (1023, "B"), (1024, "KiB"), (5 << 20, "MiB"), (3 << 30, "GiB")])
def test_byte_unit(largest, unit):
    assert byte_unit(largest)[0] == unit


def test_a_graph_of_another_length_is_refused_with_both_counts():
    plan = plan_memory(three_step_graph(), "mxnet")
    other = with_backward(residual_stack(1))
    with pytest.raises(PlanError, match=f"{other.num_steps} nodes but plan 'mxnet' covers 3 steps"):
        plan.plot(graph=other)


@pytest.mark.parametrize("compare", [42, ["mxnet"]])
def test_compare_must_hold_plans(compare):
    plan = plan_memory(three_step_graph(), "mxnet")
    with pytest.raises(PlanError, match="compare= takes a MemoryPlan"):
        memory_picture(plan, compare=compare)


def test_without_matplotlib_the_error_says_which_extra_to_install(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib...` fail
    plan = plan_memory(three_step_graph(), "mxnet")
    with pytest.raises(MissingComponentError, match=r"pip install 'mxkit-memplan\[plot\]'"):
        plan.plot()


def test_plot_writes_a_png_whose_lines_are_the_plans(tmp_path):
    pytest.importorskip("matplotlib")
    graph = with_backward(residual_stack(2))
    plans = [plan_memory(graph, name) for name in ("mxnet", "none", "greedy")]
    ax = plans[0].plot(graph=graph, compare=plans[1:])
    path = tmp_path / "plan.png"
    ax.figure.savefig(path)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5000
    # the drawn horizontal lines are the plans' totals, in the axis unit
    unit, scale = byte_unit(max(p.total_bytes for p in plans))
    assert ax.get_ylabel() == f"memory ({unit})"
    heights = sorted(line.get_ydata()[0] * scale for line in ax.get_lines() if line.get_linestyle() == "--")
    assert heights == pytest.approx(sorted(p.total_bytes for p in plans))
    curve = ax.get_lines()[0]
    assert list(curve.get_ydata() * scale) == pytest.approx(list(plans[0].live_bytes))


def test_plot_draws_into_given_axes():
    matplotlib_figure = pytest.importorskip("matplotlib.figure")
    ax = matplotlib_figure.Figure().add_subplot()
    assert plan_memory(three_step_graph(), "greedy").plot(ax=ax) is ax
    assert len(ax.get_lines()) == 2
