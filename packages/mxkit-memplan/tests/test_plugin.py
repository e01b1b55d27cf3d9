"""The planners as plugins: chosen by name, by configuration, or by a third party."""

import pytest
from mxkit.core import config, hookimpl, plugins
from mxkit.core.errors import PluginError, UnknownPluginError
from mxkit.core.specs import PlannerSpec
from mxkit.memplan import GraphBuilder, plan_memory

NAMES = {"none", "inplace", "coshare", "mxnet", "greedy", "auto", "sublinear"}


def graph():
    g = GraphBuilder()
    g.node("a", outputs=[("x", 10)])
    g.node("b", ["x"], [("y", 10)], inplace=[(0, 0)])
    g.node("c", ["y"], [("z", 10)])
    return g.build()


def test_all_strategies_are_registered_with_descriptions():
    registry = plugins.registry("planner")
    assert NAMES <= set(registry.names())
    for name in NAMES:
        spec = plugins.get_planner(name)
        assert spec.description
        assert spec.planner(graph()).strategy == name


def test_default_comes_from_config_auto():
    assert plan_memory(graph()).strategy == "auto"


def test_environment_and_override_choose_the_strategy(monkeypatch):
    monkeypatch.setenv("MXKIT_MEMPLAN", "mxnet")
    assert plan_memory(graph()).strategy == "mxnet"
    with config.override(memplan="none"):
        assert plan_memory(graph()).strategy == "none"
        assert plan_memory(graph(), "greedy").strategy == "greedy"  # the explicit argument wins


def test_unknown_strategy_lists_the_choices(monkeypatch):
    with pytest.raises(UnknownPluginError, match=r"unknown memory planner 'fastest'.*available: .*greedy"):
        plan_memory(graph(), "fastest")
    monkeypatch.setenv("MXKIT_MEMPLAN", "bogus")
    with pytest.raises(UnknownPluginError, match=r"'bogus' \(from config 'memplan' from"):
        plan_memory(graph())


class ThirdParty:
    @hookimpl
    def mxkit_memory_planners(self):
        def apart(g, **options):
            return plan_memory(g, "none", **options)

        yield PlannerSpec(name="apart", planner=apart, description="every entry apart")
        yield PlannerSpec(name="broken", planner=lambda g, **o: {"not": "a plan"})


def test_a_third_party_planner_is_chosen_by_name():
    plugins.register_plugin(ThirdParty(), name="third-party-planner")
    plan = plan_memory(graph(), "apart")
    assert plan.total_bytes == 30
    with config.override(memplan="apart"):
        assert plan_memory(graph()).total_bytes == 30
    with pytest.raises(PluginError, match=r"planner 'broken' returned dict, not a mxkit.memplan.MemoryPlan"):
        plan_memory(graph(), "broken")
