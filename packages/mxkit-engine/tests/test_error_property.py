"""Random programs with failing operations: which ops run, and which error each var
reports, must match a serial model of MXNet's skip-and-inherit rule on every engine."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import EngineError

from .conftest import THREADED_NAMES, _close, _make


def random_program(seed, num_vars, num_ops):
    rng = random.Random(seed)
    ops = []
    for _ in range(num_ops):
        touched = rng.sample(range(num_vars), rng.randint(1, min(3, num_vars)))
        split = rng.randint(0, len(touched) - 1)  # at least one write
        ops.append((touched[:split], touched[split:], rng.random() < 0.05))
    return ops


def serial_model(num_vars, ops):
    """(ids of ops that run, the failing op each var's error comes from or None)."""
    error = [None] * num_vars
    ran = []
    for op_id, (reads, writes, fails) in enumerate(ops):
        inherited = next((error[v] for v in writes + reads if error[v] is not None), None)
        if inherited is not None:
            origin = inherited  # skipped
        else:
            ran.append(op_id)
            origin = op_id if fails else None
        if origin is not None:
            for v in writes:
                error[v] = origin
    return ran, error


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), num_vars=st.integers(1, 12), num_ops=st.integers(1, 300))
def test_failures_skip_and_propagate_like_the_serial_model(engine_name, seed, num_vars, num_ops):
    ops = random_program(seed, num_vars, num_ops)
    want_ran, want_error = serial_model(num_vars, ops)
    eng = _make(engine_name)
    try:
        vars_ = [eng.new_var() for _ in range(num_vars)]
        ran = []

        def make_op(op_id, fails):
            def op():
                ran.append(op_id)
                if fails:
                    raise ValueError(f"op {op_id} failed")
            return op

        for op_id, (reads, writes, fails) in enumerate(ops):
            eng.push(make_op(op_id, fails), reads=[vars_[v] for v in reads],
                     writes=[vars_[v] for v in writes], name=f"op{op_id}")
        reported = set()
        for v, var in enumerate(vars_):
            origin = want_error[v]
            if origin is None or origin in reported:
                eng.wait_for_var(var)  # no error, or already reported through another var
            else:
                with pytest.raises(EngineError, match=rf"'op{origin}' failed: ValueError: op {origin} failed"):
                    eng.wait_for_var(var)
                reported.add(origin)
        unreported = {origin for origin in want_error if origin is not None} - reported
        failed_elsewhere = {i for i in want_ran if ops[i][2]} - reported
        if failed_elsewhere:
            with pytest.raises(EngineError) as info:
                eng.wait_all()
            assert info.value.op_name in {f"op{i}" for i in failed_elsewhere | unreported}
        eng.wait_all()  # everything was reported once
        assert sorted(ran) == want_ran
    finally:
        _close(eng)
