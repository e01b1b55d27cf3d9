"""The planners plan exactly what they planned before they were made faster.

``fixtures/plan_fingerprints.json`` was written by ``fixtures/make_plan_fingerprints.py``
with the straightforward planners (per-node dicts and sets, linear scans): for each graph
and strategy, total bytes and a digest of every decision. Any change of a pool, offset,
in-place decision or detail changes the digest.
"""

import json
from pathlib import Path

import pytest
from memplan_testing import FINGERPRINTED, fingerprint_graphs, plan_digest, strategy_label
from mxkit.memplan.strategies import STRATEGIES

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "plan_fingerprints.json").read_text())
CASES = fingerprint_graphs(large=False)


def test_the_fixture_covers_every_graph_and_strategy():
    labels = {strategy_label(s, o) for s, o in FINGERPRINTED}
    for name, _make in CASES:
        assert set(RECORDED[name]) == labels, name


@pytest.mark.parametrize("name, make", CASES, ids=[name for name, _ in CASES])
def test_plans_are_unchanged(name, make):
    graph = make()
    for strategy, options in FINGERPRINTED:
        plan = STRATEGIES[strategy](graph, **options)
        label = strategy_label(strategy, options)
        recorded_bytes, recorded_digest = RECORDED[name][label]
        assert plan.total_bytes == recorded_bytes, f"{name} / {label}: bytes changed"
        assert plan_digest(plan) == recorded_digest, f"{name} / {label}: same bytes, different decisions"
        plan.verify(graph)
