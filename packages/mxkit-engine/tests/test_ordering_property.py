"""Random programs on every engine must match a serial replay of the same program.

Each operation records the version of every var it reads (how many writes it saw) and
appends itself to the write log of every var it writes, and computes a value from its
inputs. Whatever the thread timing, the engine must give exactly what running the
operations one by one in push order gives.
"""

import random
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ENGINE_NAMES, _close, _make


@st.composite
def programs(draw, max_ops=3000):
    num_vars = draw(st.integers(2, 40))
    num_ops = draw(st.integers(1000, max_ops))
    # one drawn seed, not thousands of draws: hypothesis stays fast at this size
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    ops = []
    for _ in range(num_ops):
        touched = rng.sample(range(num_vars), rng.randint(1, min(5, num_vars)))
        split = rng.randint(0, len(touched))
        reads, writes = touched[:split], touched[split:]
        if reads and rng.random() < 0.1:
            writes.append(reads[0])  # read and written: must count as a write
        if writes and rng.random() < 0.1:
            writes.append(writes[0])  # duplicates are removed
        priority = rng.choice((0, 0, 0, 1, 5, -3))
        sleeps = rng.random() < 0.02  # lets the GIL go, so workers interleave
        # a few asynchronous ops: completed inside fn, or later on another thread
        mode = rng.choices(("sync", "async-inline", "async-thread"), weights=(94, 4, 2))[0]
        ops.append((reads, writes, priority, sleeps, mode))
    return num_vars, ops


def serial_replay(num_vars, ops):
    values = [0] * num_vars
    versions = [0] * num_vars
    seen = []
    write_logs = [[] for _ in range(num_vars)]
    for op_id, (reads, writes, _priority, _sleeps, _mode) in enumerate(ops):
        written = list(dict.fromkeys(writes))
        read_only = [v for v in dict.fromkeys(reads) if v not in written]
        seen.append(tuple(versions[v] for v in read_only))
        total = op_id + sum(values[v] * (i + 3) for i, v in enumerate(read_only))
        for v in written:
            values[v] = (values[v] * 31 + total) % 1_000_003
            write_logs[v].append(op_id)
            versions[v] += 1
    return values, seen, write_logs


def wait_or_fail(eng, deadline_s=60.0):
    """wait_all(), but a lost wake-up or a dependency cycle fails instead of hanging."""
    start = time.monotonic()
    while getattr(eng, "pending", 0):
        assert time.monotonic() - start < deadline_s, f"{eng.pending} operations still pending: engine stuck"
        time.sleep(0.005)
    eng.wait_all()


def run_on_engine(eng, num_vars, ops):
    vars_ = [eng.new_var(name=f"v{i}") for i in range(num_vars)]
    values = [0] * num_vars
    seen = [None] * len(ops)
    write_logs = [[] for _ in range(num_vars)]

    def make_op(op_id, read_only, written, sleeps):
        def op():
            if sleeps:
                time.sleep(0)
            seen[op_id] = tuple(vars_[v].version for v in read_only)
            total = op_id + sum(values[v] * (i + 3) for i, v in enumerate(read_only))
            for v in written:
                values[v] = (values[v] * 31 + total) % 1_000_003
                write_logs[v].append(op_id)
        return op

    for op_id, (reads, writes, priority, sleeps, mode) in enumerate(ops):
        written = list(dict.fromkeys(writes))
        read_only = [v for v in dict.fromkeys(reads) if v not in written]
        op = make_op(op_id, read_only, written, sleeps)
        kwargs = dict(reads=[vars_[v] for v in reads], writes=tuple(vars_[v] for v in writes),
                      priority=priority, name=f"op{op_id}")
        if mode == "sync":
            eng.push(op, **kwargs)
        elif mode == "async-inline":
            eng.push_async(lambda done, op=op: (op(), done()), **kwargs)
        else:
            eng.push_async(lambda done, op=op: threading.Thread(target=lambda: (op(), done())).start(), **kwargs)
    wait_or_fail(eng)
    versions = [var.version for var in vars_]
    return values, seen, write_logs, versions


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                         HealthCheck.large_base_example])
@given(program=programs())
def test_random_program_equals_serial_replay(engine_name, program):
    num_vars, ops = program
    eng = _make(engine_name)
    try:
        values, seen, write_logs, versions = run_on_engine(eng, num_vars, ops)
    finally:
        _close(eng)
    want_values, want_seen, want_logs = serial_replay(num_vars, ops)
    assert write_logs == want_logs
    assert seen == want_seen
    assert values == want_values
    assert versions == [len(log) for log in want_logs]


def test_serial_replay_reference_catches_a_reordering():
    # The reference is not vacuous: swapping two dependent writes changes what it records.
    ops = [([], [0], 0, False, "sync"), ([0], [1], 0, False, "sync"), ([], [0], 0, False, "sync")]
    swapped = [ops[0], ops[2], ops[1]]
    assert serial_replay(2, ops)[1] != serial_replay(2, swapped)[1]
