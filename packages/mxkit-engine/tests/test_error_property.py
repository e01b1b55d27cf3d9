"""Random programs with failing operations and waits interleaved with the pushes: which
ops run, and which error each wait raises, must match a serial model on every engine.

The model: a failing op stores its error on the vars it writes; an op touching a var
with an error is skipped and passes that error on to the vars it writes;
``wait_for_var(v)`` raises v's error and hides it from the ops pushed on v afterwards;
``wait_all()`` raises a failure no wait reported yet, then clears every error.
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
            steps.append(("op", touched[:split], touched[split:], rng.random() < 0.05))
    return steps


class SerialModel:
    def __init__(self, num_vars):
        self.error = [None] * num_vars  # origin op id of each var's error
        self.failed = []                # failures not yet cleared by wait_all, in order
        self.reported = set()
        self.ran = []

    def op(self, op_id, reads, writes, fails):
        inherited = next((self.error[v] for v in writes + reads if self.error[v] is not None), None)
        origin = inherited
        if inherited is None:
            self.ran.append(op_id)
            if fails:
                origin = op_id
                self.failed.append(op_id)
        if origin is not None:
            for v in writes:
                self.error[v] = origin

    def wait(self, v):
        origin, self.error[v] = self.error[v], None
        if origin is not None:
            self.reported.add(origin)
        return origin

    def wait_all(self):
        unreported = {o for o in self.failed if o not in self.reported}
        self.error = [None] * len(self.error)
        self.failed = []
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
        for var in vars_:
            eng.wait_for_var(var)  # and cleared everywhere
        assert sorted(ran) == model.ran
    finally:
        _close(eng)
