"""Errors: stored on written vars until overwritten, inherited by later ops, raised by
every wait, reported once by wait_all, and the engine survives."""

import threading

import pytest
from mxkit.core.errors import EngineError


def fail(message="bad input (2, 3)", kind=ValueError):
    def op():
        raise kind(message)

    return op


def test_error_is_raised_by_wait_for_var_with_name_and_cause(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    eng.push(fail(), writes=(var,), name="conv1")
    with pytest.raises(EngineError, match=r"'conv1' failed: ValueError: bad input \(2, 3\)") as info:
        eng.wait_for_var(var)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.__cause__.__traceback__ is not None  # the original traceback is kept
    assert info.value.op_name == "conv1"
    # every later wait raises it again, until an op overwrites the var
    with pytest.raises(EngineError, match="'conv1' failed"):
        eng.wait_for_var(var)
    eng.push(lambda: None, writes=(var,))
    eng.wait_for_var(var)


def test_error_propagates_through_a_chain_and_skips_the_ops(threaded_engine):
    eng = threaded_engine
    a, b, c, unrelated = (eng.new_var() for _ in range(4))
    ran = []
    eng.push(fail(kind=KeyError), writes=(a,), name="source")
    eng.push(lambda: ran.append("b"), reads=(a,), writes=(b,), name="mid")
    eng.push(lambda: ran.append("c"), reads=(b,), writes=(c,), name="sink")
    eng.push(lambda: ran.append("unrelated"), writes=(unrelated,))
    with pytest.raises(EngineError, match="'source' failed: KeyError") as info:
        eng.wait_for_var(c)
    assert isinstance(info.value.__cause__, KeyError)
    eng.wait_for_var(unrelated)
    assert ran == ["unrelated"]
    # versions still count the (skipped) writes: the queue moved on
    assert (a.version, b.version, c.version) == (1, 1, 1)


def test_an_in_place_update_of_an_errored_var_inherits_and_an_overwrite_clears(any_engine):
    eng = any_engine
    var = eng.new_var()
    ran = []
    try:
        eng.push(fail(), writes=(var,), name="first")
    except EngineError:
        assert eng.name == "naive"  # the naive engine raises at the push
    try:  # read and written: an update of the failed data is skipped
        eng.push(lambda: ran.append("update"), reads=(var,), writes=(var,), name="update")
    except EngineError as exc:
        assert eng.name == "naive" and "'first' failed" in str(exc)
    with pytest.raises(EngineError, match="'first' failed"):
        eng.wait_for_var(var)
    assert ran == []
    eng.push(lambda: ran.append("overwrite"), writes=(var,), name="overwrite")  # written, not read
    eng.wait_for_var(var)
    assert ran == ["overwrite"]


def test_wait_all_raises_the_first_error_once_and_the_vars_keep_theirs(threaded_engine):
    eng = threaded_engine
    a, b = eng.new_var(), eng.new_var()
    gate = threading.Event()
    eng.push(lambda: gate.wait(5), writes=(b,))
    eng.push(fail("first"), writes=(a,), name="one")
    eng.push(fail("second"), reads=(b,), writes=(b,), name="two")  # after the gate: fails later
    while a.version == 0:  # 'one' has failed; only now let 'two' run
        threading.Event().wait(0.001)
    gate.set()
    with pytest.raises(EngineError, match=r"'one' failed: ValueError: first \(and 1 more failed operation\(s\): "
                                          r"'two'\)") as info:
        eng.wait_all()
    assert [name for name, _ in info.value.others] == ["two"]
    eng.wait_all()  # each failure is reported once
    with pytest.raises(EngineError, match="'one' failed"):
        eng.wait_for_var(a)  # but the failed outputs stay poisoned
    with pytest.raises(EngineError, match="'two' failed"):
        eng.wait_for_var(b)
    done = []
    eng.push(lambda: done.append(1), reads=(a,), writes=(b,))  # reads a failed output: skipped
    eng.wait_all()  # an inherited error is no new failure
    assert done == []
    eng.push(lambda: done.append(2), writes=(a,))
    eng.push(lambda: done.append(3), reads=(a,), writes=(b,))
    eng.wait_all()
    eng.wait_for_var(b)
    assert done == [2, 3]


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, MemoryError])
def test_base_exceptions_do_not_kill_the_workers(threaded_engine, raised):
    eng = threaded_engine
    var = eng.new_var()
    for _ in range(eng.num_workers * 2):
        eng.push(fail(kind=raised), writes=(var,), name="rude")
        with pytest.raises(EngineError, match=raised.__name__):
            eng.wait_for_var(var)
    done = []
    eng.push(lambda: done.append(1), writes=(var,))
    eng.wait_for_var(var)
    assert done == [1]


def test_async_failure_and_double_completion(any_engine):
    eng = any_engine
    var = eng.new_var()
    calls = []

    def starts_io(on_complete):
        def finish():
            on_complete(OSError("disk gone"))
            try:
                on_complete()
            except EngineError as exc:
                calls.append(str(exc))
        threading.Thread(target=finish).start()

    with pytest.raises(EngineError, match="'read' failed: OSError: disk gone"):
        eng.push_async(starts_io, writes=(var,), name="read")
        eng.wait_for_var(var)
    for _ in range(100):
        if calls:
            break
        threading.Event().wait(0.01)
    assert calls and "called twice" in calls[0]


def test_async_op_raising_before_completing_counts_as_its_failure(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()

    def broken(on_complete):
        raise RuntimeError("could not start")

    eng.push_async(broken, writes=(var,), name="start")
    with pytest.raises(EngineError, match="'start' failed: RuntimeError: could not start"):
        eng.wait_for_var(var)


def test_on_complete_with_a_non_exception_is_an_error(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    eng.push_async(lambda done: done("oops"), writes=(var,), name="weird")
    with pytest.raises(EngineError, match="pass an exception or nothing"):
        eng.wait_for_var(var)


def test_a_dropped_on_complete_fails_the_op_instead_of_hanging(any_engine):
    eng = any_engine
    var = eng.new_var()
    message = "'forgot' failed: EngineError: the on_complete of asynchronous operation 'forgot' was dropped"
    if eng.name == "naive":
        with pytest.raises(EngineError, match=message):
            eng.push_async(lambda on_complete: None, writes=(var,), name="forgot")
        return
    eng.push_async(lambda on_complete: None, writes=(var,), name="forgot")
    after = []
    eng.push(lambda: after.append(1), reads=(var,))
    with pytest.raises(EngineError, match=message):
        eng.wait_for_var(var)
    eng.wait_all()  # wait_for_var reported it
    with pytest.raises(EngineError, match=message):
        eng.wait_for_var(var)  # but it stays on the var
    assert after == []  # skipped: it read the failed op's output


def test_a_reader_and_a_wait_all_racing_never_lose_the_error(any_engine):
    eng = any_engine
    for round_number in range(100):
        var = eng.new_var()
        gate = threading.Event()
        if eng.name == "naive":
            gate.set()  # the op runs at its push, on this thread
        name = f"fails{round_number}"
        try:
            # threaded: the op fails while both threads wait; naive: it fails at its push
            eng.push(lambda gate=gate: (gate.wait(5), fail()()), writes=(var,), name=name)
        except EngineError:
            assert eng.name == "naive"
        start = threading.Barrier(3)
        seen = {}

        def reader(var=var, start=start, seen=seen):
            start.wait()
            try:
                eng.wait_for_var(var)
                seen["reader"] = None
            except EngineError as exc:
                seen["reader"] = exc.op_name

        def waiter(start=start, seen=seen):
            start.wait()
            try:
                eng.wait_all()
                seen["wait_all"] = None
            except EngineError as exc:
                seen["wait_all"] = exc.op_name

        threads = [threading.Thread(target=reader), threading.Thread(target=waiter)]
        for thread in threads:
            thread.start()
        start.wait()
        gate.set()
        for thread in threads:
            thread.join(10)
        assert seen["reader"] == name  # whichever thread reported first
        assert seen["wait_all"] in (None, name)  # at most once, and only this failure
        eng.wait_all()
        with pytest.raises(EngineError, match=f"'{name}' failed"):
            eng.wait_for_var(var)  # still poisoned
