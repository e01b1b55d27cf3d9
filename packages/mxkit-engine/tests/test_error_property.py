"""Random programs with failing operations and waits interleaved with the pushes: which
ops run, and which error each wait raises, must match a serial model on every engine.

The model: a failing op stores its error on the vars it writes; an op reading a var
with an error (or updating it in place: read and written) is skipped and passes that
error on to the vars it writes; an op that runs overwrites the errors of its writes;
``wait_for_var(v)`` raises v's error every time; ``wait_all()`` raises a failure no wait
reported yet and leaves the vars' errors as they are.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import EngineError

from .conftest import THREADED_NAMES, _close, _make


def random_program(seed, num_vars, num_steps):
    rng = random.Random(seed)
    steps = []
    for _ in range(num_steps):
        roll = rng.random()
        if roll < 0.05:
            steps.append(("wait", rng.randrange(num_vars)))
        elif roll < 0.06:
            steps.append(("wait_all",))
        else:
            touched = rng.sample(range(num_vars), rng.randint(1, min(3, num_vars)))
            split = rng.randint(0, len(touched) - 1)  # at least one write
            reads, writes = touched[:split], touched[split:]
            if rng.random() < 0.2:
                reads = [*reads, writes[0]]  # an in-place update: read and written
            steps.append(("op", reads, writes, rng.random() < 0.05))
    return steps


class SerialModel:
    def __init__(self, num_vars):
        self.error = [None] * num_vars  # origin op id of each var's error
        self.failed = []                # failures no wait reported yet
        self.ran = []

    def op(self, op_id, reads, writes, fails):
        # the engine looks at the vars only read first, then at those read and written
        looked_at = [v for v in reads if v not in writes] + [v for v in reads if v in writes]
        origin = next((self.error[v] for v in looked_at if self.error[v] is not None), None)
        if origin is None:
            self.ran.append(op_id)
            if fails:
                origin = op_id
                self.failed.append(op_id)
        for v in writes:
            self.error[v] = origin  # None: overwritten by an op that ran

    def wait(self, v):
        if self.error[v] in self.failed:
            self.failed.remove(self.error[v])
        return self.error[v]

    def wait_all(self):
        unreported, self.failed = set(self.failed), []
        return unreported


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), num_vars=st.integers(1, 12), num_steps=st.integers(1, 300))
def test_failures_skip_and_propagate_like_the_serial_model(engine_name, seed, num_vars, num_steps):
    steps = random_program(seed, num_vars, num_steps)
    model = SerialModel(num_vars)
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

        for op_id, step in enumerate(steps):
            if step[0] == "op":
                _, reads, writes, fails = step
                model.op(op_id, reads, writes, fails)
                eng.push(make_op(op_id, fails), reads=[vars_[v] for v in reads],
                         writes=[vars_[v] for v in writes], name=f"op{op_id}")
            elif step[0] == "wait":
                origin = model.wait(step[1])
                if origin is None:
                    eng.wait_for_var(vars_[step[1]])
                else:
                    with pytest.raises(EngineError, match=rf"'op{origin}' failed: ValueError: op {origin} failed"):
                        eng.wait_for_var(vars_[step[1]])
            else:
                unreported = model.wait_all()
                if unreported:
                    with pytest.raises(EngineError) as info:
                        eng.wait_all()
                    assert info.value.op_name in {f"op{o}" for o in unreported}
                else:
                    eng.wait_all()
        unreported = model.wait_all()
        if unreported:
            with pytest.raises(EngineError) as info:
                eng.wait_all()
            assert info.value.op_name in {f"op{o}" for o in unreported}
        eng.wait_all()  # reported once
        for v, var in enumerate(vars_):  # but the failed outputs keep their errors
            origin = model.wait(v)
            if origin is None:
                eng.wait_for_var(var)
            else:
                with pytest.raises(EngineError, match=rf"'op{origin}' failed"):
                    eng.wait_for_var(var)
        assert sorted(ran) == model.ran
    finally:
        _close(eng)
