"""Learning-rate schedules against their formulas and against MXNet 1.9.1's values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from mxkit import mx
from mxkit.train._registry import TrainingValueError, UnknownNameError

FIXTURES = Path(__file__).parent / "fixtures"
MXNET_CASES = json.loads((FIXTURES / "mxnet_reference.json").read_text())["schedulers"]


@pytest.mark.parametrize("case", MXNET_CASES, ids=[c["case"] for c in MXNET_CASES])
def test_schedule_matches_mxnet(case):
    scheduler = getattr(mx.lr_scheduler, case["class"])(**case["kwargs"])
    assert [scheduler(n) for n in case["points"]] == pytest.approx(case["lrs"], rel=1e-12)


def test_factor_formula():
    scheduler = mx.lr_scheduler.FactorScheduler(step=10, factor=0.5, base_lr=1.0)
    for n in range(0, 60):
        # base_lr * factor ** floor((n - 1) / step): the change happens after update `step`
        assert scheduler(n) == pytest.approx(0.5 ** max(0, (n - 1) // 10)), n


def test_factor_stops_at_stop_factor_lr():
    scheduler = mx.lr_scheduler.FactorScheduler(step=1, factor=0.1, base_lr=1.0, stop_factor_lr=1e-3)
    assert [scheduler(n) for n in range(1, 7)] == pytest.approx([1.0, 0.1, 0.01, 1e-3, 1e-3, 1e-3])


def test_multifactor_formula():
    scheduler = mx.lr_scheduler.MultiFactorScheduler(step=[3, 7], factor=0.1, base_lr=2.0)
    expected = [2.0] * 4 + [0.2] * 4 + [0.02] * 4
    assert [scheduler(n) for n in range(12)] == pytest.approx(expected)


def test_poly_and_cosine_formulas():
    poly = mx.lr_scheduler.PolyScheduler(max_update=20, base_lr=0.5, pwr=3, final_lr=0.1)
    cosine = mx.lr_scheduler.CosineScheduler(max_update=20, base_lr=0.5, final_lr=0.1)
    for n in range(0, 25):
        m = min(n, 20)
        assert poly(n) == pytest.approx(0.1 + 0.4 * (1 - m / 20) ** 3)
        assert cosine(n) == pytest.approx(0.1 + 0.4 * (1 + math.cos(math.pi * m / 20)) / 2)


@pytest.mark.parametrize("mode", ["linear", "constant"])
def test_warmup(mode):
    scheduler = mx.lr_scheduler.CosineScheduler(max_update=14, base_lr=0.4, warmup_steps=4, warmup_begin_lr=0.2,
                                                warmup_mode=mode)
    warm = [scheduler(n) for n in range(4)]
    if mode == "linear":
        assert warm == pytest.approx([0.2, 0.25, 0.3, 0.35])
    else:
        assert warm == pytest.approx([0.2] * 4)
    assert scheduler(4) == pytest.approx(0.4)
    assert scheduler(9) == pytest.approx(0.2)  # half way through the cosine
    assert scheduler(14) == pytest.approx(0.0)


def test_description_round_trip():
    for scheduler in (mx.lr_scheduler.FactorScheduler(step=3, factor=0.5, base_lr=0.1, warmup_steps=2),
                      mx.lr_scheduler.MultiFactorScheduler(step=[2, 4], factor=0.5),
                      mx.lr_scheduler.PolyScheduler(max_update=9, pwr=1.5),
                      mx.lr_scheduler.CosineScheduler(max_update=9, final_lr=0.001)):
        description = json.loads(json.dumps(scheduler.describe()))
        rebuilt = mx.lr_scheduler.create(**description)
        assert type(rebuilt) is type(scheduler)
        assert [rebuilt(n) for n in range(12)] == [scheduler(n) for n in range(12)]
    assert isinstance(mx.lr_scheduler.create("FactorScheduler", step=2), mx.lr_scheduler.FactorScheduler)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: mx.lr_scheduler.FactorScheduler(step=0), "step must be an int >= 1, got 0"),
    (lambda: mx.lr_scheduler.FactorScheduler(step=2, factor=1.5), r"factor=1.5 is outside"),
    (lambda: mx.lr_scheduler.MultiFactorScheduler(step=[3, 2]), r"step must be increasing, got \[3, 2\]"),
    (lambda: mx.lr_scheduler.MultiFactorScheduler(step=[]), "non-empty list"),
    (lambda: mx.lr_scheduler.PolyScheduler(max_update=0), "max_update must be an int >= 1"),
    (lambda: mx.lr_scheduler.CosineScheduler(max_update=4, warmup_steps=4), "must exceed warmup_steps"),
    (lambda: mx.lr_scheduler.FactorScheduler(step=2, base_lr=0.1, warmup_begin_lr=0.5), "above base_lr"),
    (lambda: mx.lr_scheduler.FactorScheduler(step=2, warmup_mode="cubic"), "warmup_mode='cubic'"),
    (lambda: mx.lr_scheduler.FactorScheduler(step=2, warmup_steps=-1), "warmup_steps must be an int >= 0"),
])
def test_bad_arguments_are_clear_errors(build, message):
    with pytest.raises(TrainingValueError, match=message):
        build()


def test_unknown_scheduler_name_lists_choices():
    with pytest.raises(UnknownNameError, match=r"unknown lr_scheduler 'step'.*choices: .*cosine"):
        mx.lr_scheduler.create("step")
