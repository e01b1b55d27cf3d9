"""The profile's dependency arrows against the engine's semantics, on random programs.

A serial analysis of the program gives, for every op B and var v it touches, the op A
whose write B must wait for on v (the last writer of v before B, if B is a read or a
write with no read of v in between). The profile must agree with the engine and that
analysis: every arrow is such a pair on that var; every such pair has B start after A
ended; B was granted v by A's completion (an arrow) whenever A had not started yet when
B was pushed; and no arrow exists when B was pushed after A ended.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.engine import profiler

from .conftest import THREADED_NAMES, _close, _make

EPS_US = 0.002


@pytest.fixture(autouse=True)
def fresh_profiler():
    profiler.reset()
    yield
    profiler.reset()


@st.composite
def programs(draw):
    num_vars = draw(st.integers(2, 8))
    num_ops = draw(st.integers(50, 400))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    ops = []
    for _ in range(num_ops):
        touched = rng.sample(range(num_vars), rng.randint(1, min(3, num_vars)))
        split = rng.randint(0, len(touched))
        spin = rng.choice((0, 0, 0, 200, 2000))  # some ops take long enough for others to queue
        ops.append((touched[:split], touched[split:], spin, rng.random() < 0.1))
    return num_vars, ops


def expected_waits(ops):
    """{(A, B, v)}: B waits for A's write of v (A the last writer of v before B; for a
    writing B, no read of v between them, else B waits for the reads instead)."""
    last_writer = {}
    reads_since_write = {}
    waits = set()
    for b, (reads, writes, _spin, _async) in enumerate(ops):
        written = set(writes)
        for v in set(reads) - written:
            if v in last_writer:
                waits.add((last_writer[v], b, v))
            reads_since_write[v] = True
        for v in written:
            if v in last_writer and not reads_since_write.get(v):
                waits.add((last_writer[v], b, v))
            last_writer[v] = b
            reads_since_write[v] = False
    return waits


def spin_op(n):
    def op():
        total = 0
        for i in range(n):
            total += i
        return total
    return op


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_flow_arrows_match_the_engines_ordering(engine_name, program):
    num_vars, ops = program
    profiler.reset()
    eng = _make(engine_name)
    try:
        vars_ = [eng.new_var() for _ in range(num_vars)]
        profiler.set_state("run")
        for i, (reads, writes, spin, is_async) in enumerate(ops):
            kwargs = dict(reads=[vars_[v] for v in reads], writes=[vars_[v] for v in writes], name=f"op{i}")
            work = spin_op(spin)
            if is_async:
                eng.push_async(lambda done, work=work: (work(), done()), **kwargs)
            else:
                eng.push(work, **kwargs)
        eng.wait_all()
        profiler.set_state("stop")
    finally:
        _close(eng)
    events = profiler.trace()["traceEvents"]
    var_index = {var.id: i for i, var in enumerate(vars_)}
    times = {}   # op index -> (push, start, end) in us
    at = {}      # (pid, tid, ts) of an op's start -> op index
    ends = {}
    for event in events:
        if event["ph"] in ("X", "b") and event["name"].startswith("op"):
            index = int(event["name"][2:])
            times[index] = [event["args"]["push_us"], event["ts"], event["ts"] + event.get("dur", 0.0)]
            at[(event["pid"], event["tid"], event["ts"])] = index
            if event["ph"] == "b":
                ends[event["id"]] = index
        elif event["ph"] == "e":
            times[ends[event["id"]]][2] = event["ts"]
    assert sorted(times) == list(range(len(ops)))
    arrows = set()
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    for event in events:
        if event["ph"] == "f":
            source = starts.pop(event["id"])
            arrows.add((at[(source["pid"], source["tid"], source["ts"])],
                        at[(event["pid"], event["tid"], event["ts"])], var_index[event["args"]["var"]]))
    assert not starts, "flow starts without a finish"
    waits = expected_waits(ops)
    assert arrows <= waits, f"arrows the program does not imply: {sorted(arrows - waits)[:5]}"
    for a, b, v in waits:
        _a_push, a_start, a_end = times[a]
        b_push, b_start, _b_end = times[b]
        assert b_start >= a_end - EPS_US, f"op{b} started before op{a}, whose write of v{v} it needs, ended"
        if a_start > b_push + EPS_US:
            assert (a, b, v) in arrows, f"op{b} was queued behind op{a} on v{v} but has no arrow from it"
        if b_push > a_end + EPS_US:
            assert (a, b, v) not in arrows, f"op{b} was pushed after op{a} ended yet has an arrow from it"


def test_expected_waits_reference_is_not_vacuous():
    ops = [([], [0], 0, False), ([0], [1], 0, False), ([0], [], 0, False), ([], [0], 0, False),
           ([], [0], 0, False)]
    # op1, op2 read op0's write; op3 waits for those reads (no arrow); op4 follows op3's write
    assert expected_waits(ops) == {(0, 1, 0), (0, 2, 0), (3, 4, 0)}
