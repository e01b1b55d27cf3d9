"""``push(..., small=True)``: an op granted at once runs on the pushing thread (the inline
fast path), and that must change nothing but which thread runs it.

Programs that mix inline and queued ops, with failing ops among them, pushed from one
thread and from eight at once, must give what a serial replay of the same ops in push
order gives: the versions each op saw, each var's write log and value, and the error each
var holds (the op it came from).
"""

import random
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import EngineError

from .conftest import THREADED_NAMES, _close, _make
from .test_error_property import SerialModel, random_program

# -- which thread runs a small op ---------------------------------------------------------


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_a_small_op_granted_at_once_runs_on_the_pushing_thread(engine_name):
    eng = _make(engine_name)
    try:
        var = eng.new_var()
        ran_on = []
        eng.push(lambda: ran_on.append(threading.get_ident()), writes=[var], small=True)
        # it already ran: nothing is pending and the var is readable without a wait
        assert ran_on == [threading.get_ident()]
        assert eng.pending == 0 and var.version == 1
        eng.push(lambda: ran_on.append(threading.get_ident()), writes=[var])  # not small: a worker
        eng.wait_for_var(var)
        assert ran_on[1] != threading.get_ident()
    finally:
        _close(eng)


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_a_small_op_behind_a_pending_write_waits_for_it_on_a_worker(engine_name):
    eng = _make(engine_name)
    try:
        var, out = eng.new_var(), eng.new_var()
        release = threading.Event()
        log = []
        eng.push(lambda: (release.wait(30), log.append("write")), writes=[var])
        eng.push(lambda: log.append(("read", threading.get_ident())), reads=[var], writes=[out], small=True)
        assert log == []  # the push returned without running the read: it is not granted yet
        release.set()
        eng.wait_for_var(out)
        assert log[0] == "write" and log[1][0] == "read" and log[1][1] != threading.get_ident()
    finally:
        _close(eng)


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_a_wait_inside_an_inline_op_raises_instead_of_waiting_for_itself(engine_name):
    eng = _make(engine_name)
    try:
        var, other = eng.new_var(), eng.new_var()

        def waits_for_its_own_output():
            eng.wait_for_var(var)

        eng.push(waits_for_its_own_output, writes=[var], small=True, name="self_wait")
        with pytest.raises(EngineError, match=r"'self_wait' failed: EngineError: wait_for_var\(\) inside an operation"):
            eng.wait_for_var(var)
        eng.push(lambda: eng.wait_all(), writes=[other], small=True, name="wait_all_inside")
        with pytest.raises(EngineError, match="wait_all_inside"):
            eng.wait_for_var(other)
    finally:
        _close(eng)


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_an_op_pushed_from_inside_an_inline_op_is_queued_not_nested(engine_name):
    eng = _make(engine_name)
    try:
        outer, inner = eng.new_var(), eng.new_var()
        caller = threading.get_ident()
        events = []

        def pushes_a_follow_up():
            events.append(("outer", threading.get_ident()))
            eng.push(lambda: events.append(("inner", threading.get_ident())), reads=[], writes=[inner], small=True)
            events.append(("outer done", threading.get_ident()))

        eng.push(pushes_a_follow_up, writes=[outer], small=True)
        eng.wait_for_var(inner)
        assert events[0] == ("outer", caller)
        assert ("outer done", caller) in events
        inner_runs = [ident for what, ident in events if what == "inner"]
        assert len(inner_runs) == 1 and inner_runs[0] != caller  # a worker took it
    finally:
        _close(eng)


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_a_failing_inline_op_keeps_its_error_on_its_outputs(engine_name):
    eng = _make(engine_name)
    try:
        bad, downstream, fresh = eng.new_var(), eng.new_var(), eng.new_var()
        ran = []

        def fails():
            raise ValueError("kernel broke")

        eng.push(fails, writes=[bad], small=True, name="broken")  # the push itself does not raise
        eng.push(lambda: ran.append("skipped?"), reads=[bad], writes=[downstream], small=True)
        for _ in range(2):  # every wait raises it again
            with pytest.raises(EngineError, match="'broken' failed: ValueError: kernel broke"):
                eng.wait_for_var(bad)
        with pytest.raises(EngineError, match="'broken' failed"):
            eng.wait_for_var(downstream)
        assert ran == []  # it read a failed input: skipped
        eng.push(lambda: ran.append("overwrite"), writes=[bad], small=True)
        eng.wait_for_var(bad)  # a successful overwrite clears the error
        eng.push(lambda: ran.append("fresh"), reads=[bad], writes=[fresh], small=True)
        eng.wait_for_var(fresh)
        assert ran == ["overwrite", "fresh"]
    finally:
        _close(eng)


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
def test_ctrl_c_inside_an_inline_op_interrupts_the_caller_and_fails_the_op(engine_name):
    eng = _make(engine_name)
    try:
        var = eng.new_var()

        def interrupted():
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            eng.push(interrupted, writes=[var], small=True, name="interrupted")
        assert eng.pending == 0  # the op completed (failed): nothing waits behind it forever
        with pytest.raises(EngineError, match="'interrupted' failed: KeyboardInterrupt"):
            eng.wait_for_var(var)
    finally:
        _close(eng)


def test_the_naive_engine_takes_small_and_runs_at_push_as_always():
    eng = _make("naive")
    var = eng.new_var()
    ran = []
    eng.push(lambda: ran.append(1), writes=[var], small=True)
    assert ran == [1] and var.version == 1 and type(eng).inline_small_ops


# -- random programs against the serial model -------------------------------------------


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), num_vars=st.integers(1, 10), num_steps=st.integers(1, 200))
def test_mixed_inline_and_queued_failures_follow_the_serial_model(engine_name, seed, num_vars, num_steps):
    # test_error_property's programs and model, with a random half of the ops pushed as small
    steps = random_program(seed, num_vars, num_steps)
    small_flags = random.Random(seed + 1).choices((True, False), k=num_steps)
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
                         writes=[vars_[v] for v in writes], name=f"op{op_id}", small=small_flags[op_id])
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
        try:
            eng.wait_all()
        except EngineError:
            pass
        for v, var in enumerate(vars_):
            origin = model.wait(v)
            if origin is None:
                eng.wait_for_var(var)
            else:
                with pytest.raises(EngineError, match=rf"'op{origin}' failed"):
                    eng.wait_for_var(var)
        assert sorted(ran) == model.ran
    finally:
        _close(eng)


THREADS = 8


def thread_program(seed, num_vars, num_ops):
    """One pushing thread's ops: (reads, writes, small, fails)."""
    rng = random.Random(seed)
    ops = []
    for _ in range(num_ops):
        touched = rng.sample(range(num_vars), rng.randint(1, min(3, num_vars)))
        split = rng.randint(0, len(touched) - 1)
        reads, writes = touched[:split], touched[split:]
        if rng.random() < 0.2:
            reads = [*reads, writes[0]]  # an in-place update
        ops.append((reads, writes, rng.random() < 0.5, rng.random() < 0.03))
    return ops


def serial_replay(num_vars, ops):
    """Values, versions seen by each op that ran, write logs and error origins, one op at a time."""
    values, versions = [0] * num_vars, [0] * num_vars
    errors = [None] * num_vars
    seen, logs = {}, [[] for _ in range(num_vars)]
    for op_id, (reads, writes, _small, fails) in ops:
        read_only = [v for v in reads if v not in writes]
        looked_at = read_only + [v for v in reads if v in writes]
        origin = next((errors[v] for v in looked_at if errors[v] is not None), None)
        if origin is None:
            seen[op_id] = tuple(versions[v] for v in read_only)
            if fails:
                origin = op_id
            else:
                total = hash(op_id) % 1000 + sum(values[v] * (i + 3) for i, v in enumerate(read_only))
                for v in writes:
                    values[v] = (values[v] * 31 + total) % 1_000_003
                    logs[v].append(op_id)
        for v in writes:
            errors[v] = origin
            versions[v] += 1
    return values, seen, logs, errors


@pytest.mark.parametrize("engine_name", THREADED_NAMES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), num_vars=st.integers(2, 12), per_thread=st.integers(20, 120))
def test_eight_threads_mixing_inline_and_queued_ops_equal_a_serial_replay(engine_name, seed, num_vars, per_thread):
    programs = [thread_program(seed * THREADS + t, num_vars, per_thread) for t in range(THREADS)]
    eng = _make(engine_name)
    try:
        vars_ = [eng.new_var() for _ in range(num_vars)]
        values = [0] * num_vars
        seen, logs = {}, [[] for _ in range(num_vars)]
        order = []  # (op id, op) in the one global push order the engine saw
        order_lock = threading.Lock()
        start = threading.Barrier(THREADS)
        failures = []

        def make_op(op_id, read_only, writes, fails):
            def op():
                seen[op_id] = tuple(vars_[v].version for v in read_only)
                if fails:
                    raise ValueError(f"op {op_id} failed")
                total = hash(op_id) % 1000 + sum(values[v] * (i + 3) for i, v in enumerate(read_only))
                for v in writes:
                    values[v] = (values[v] * 31 + total) % 1_000_003
                    logs[v].append(op_id)
            return op

        def pusher(t):
            try:
                start.wait(30)
                for k, (reads, writes, small, fails) in enumerate(programs[t]):
                    op_id = (t, k)
                    read_only = [v for v in reads if v not in writes]
                    fn = make_op(op_id, read_only, writes, fails)
                    # the lock makes the recorded order the push order (an inline op runs
                    # inside the push, so inside the lock: other threads' workers go on)
                    with order_lock:
                        eng.push(fn, reads=[vars_[v] for v in reads], writes=[vars_[v] for v in writes],
                                 name=f"op{t}-{k}", small=small)
                        order.append((op_id, programs[t][k]))
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        threads = [threading.Thread(target=pusher, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures
        deadline = time.monotonic() + 60
        while eng.pending:  # a lost wake-up fails here instead of hanging
            assert time.monotonic() < deadline, f"{eng.pending} operations still pending: engine stuck"
            time.sleep(0.005)
        try:
            eng.wait_all()
        except EngineError:
            pass
        want_values, want_seen, want_logs, want_errors = serial_replay(num_vars, order)
        assert logs == want_logs
        assert seen == want_seen
        assert values == want_values
        for v, var in enumerate(vars_):
            if want_errors[v] is None:
                eng.wait_for_var(var)
            else:
                t, k = want_errors[v]
                with pytest.raises(EngineError, match=rf"'op{t}-{k}' failed: ValueError"):
                    eng.wait_for_var(var)
    finally:
        _close(eng)
