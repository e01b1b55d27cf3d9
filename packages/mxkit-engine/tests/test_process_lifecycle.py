"""The engine across the process's life: the process engine, fork, interpreter exit."""

import os
import subprocess
import sys
import textwrap
import time

import mxkit.engine as engine
import pytest
from mxkit.core import config
from mxkit.core.errors import EngineError, UnknownPluginError


@pytest.fixture
def fresh_process_engine():
    engine.reset()
    yield
    engine.reset()


def test_get_uses_config_and_is_cached(fresh_process_engine, monkeypatch):
    monkeypatch.setenv("MXKIT_ENGINE", "naive")
    first = engine.get()
    assert first.name == "naive"
    assert engine.get() is first
    engine.reset()
    monkeypatch.delenv("MXKIT_ENGINE")
    assert engine.get().name == "threaded_per_device"  # the default


def test_set_engine_switches_and_returns_the_previous(fresh_process_engine):
    with config.override(engine="threaded"):
        previous = engine.get()
    assert previous.name == "threaded"
    returned = engine.set_engine("naive")
    assert returned is previous
    assert engine.get().name == "naive"


def test_unknown_engine_lists_the_choices(monkeypatch):
    monkeypatch.setenv("MXKIT_ENGINE", "turbo")
    with pytest.raises(UnknownPluginError, match=r"unknown engine 'turbo'.*naive, threaded, threaded_per_device"):
        engine.create()


def _run_child(code, timeout=60, env=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_gets_a_fresh_engine_and_a_clear_error_on_the_old_one():
    # In a subprocess, so that forking never copies this test runner's threads.
    result = _run_child("""
        import os, threading
        import mxkit.engine as engine
        from mxkit.core.errors import EngineError

        eng = engine.get()
        var = eng.new_var()
        gate = threading.Event()
        eng.push(lambda: gate.wait(2), writes=(var,))   # busy worker at the fork
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                eng.push(lambda: None, writes=(var,))
                code = 10
            except EngineError as exc:
                code = 0 if "before os.fork()" in str(exc) else 11
            fresh = engine.get()
            if fresh is eng:
                code = 12
            v = fresh.new_var()
            out = []
            for i in range(100):
                fresh.push(lambda i=i: out.append(i), writes=(v,))
            fresh.wait_for_var(v)
            if out != list(range(100)):
                code = 13
            os._exit(code)
        gate.set()
        _, status = os.waitpid(pid, 0)
        eng.wait_for_var(var)
        print("child", os.waitstatus_to_exitcode(status), "parent", var.version)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["child", "0", "parent", "1"]


_ADOPTION_CHILD = """
    import os, threading
    import mxkit.engine as engine
    from mxkit.core.errors import EngineError

    eng = engine.get()
    done, failed, busy = eng.new_var("done"), eng.new_var("failed"), eng.new_var("busy")
    eng.push(lambda: None, writes=(done,))
    try:
        eng.push(lambda: 1 / 0, writes=(failed,), name="divide")
        eng.wait_for_var(failed)
    except EngineError:
        pass
    gate = threading.Event()
    if eng.name != "naive":
        eng.push(lambda: gate.wait(5), writes=(busy,), name="slow")   # still writing at the fork
    other = engine.create(eng.name)
    mine = other.new_var("another engine's")   # made in the child's parent, by another engine
    pid = os.fork()
    if pid == 0:
        fresh = engine.get()
        seen = []
        fresh.push(lambda: seen.append("read"), reads=(done,))      # a parent's var, complete
        fresh.push(lambda: seen.append("write"), writes=(done,))
        fresh.push(lambda: None, reads=(mine,), writes=(mine,))    # any pre-fork engine's var
        fresh.wait_for_var(done)
        code = 0 if seen == ["read", "write"] else 20
        if fresh.new_var() is done:
            code = 21
        try:
            fresh.wait_for_var(failed)
            code = 22
        except EngineError as exc:
            code = code if "divide" in str(exc) else 23
        if eng.name != "naive":
            try:
                fresh.wait_for_var(busy)
                code = 24
            except EngineError as exc:
                code = code if "before os.fork()" in str(exc) or "called os.fork()" in str(exc) else 25
            fresh.push(lambda: None, writes=(busy,))                 # overwriting it clears that
            fresh.wait_for_var(busy)
        fresh.delete_var(done)
        try:
            fresh.push(lambda: None, reads=(done,))
            code = 26
        except EngineError as exc:
            code = code if "delete_var" in str(exc) else 27
        try:
            fresh.push(lambda: None, reads=("not a var",))
            code = 28
        except EngineError as exc:
            code = code if "made by this" in str(exc) else 29
        os._exit(code)
    gate.set()
    _, status = os.waitpid(pid, 0)
    eng.wait_all()
    eng.push(lambda: None, reads=(done,), writes=(busy,))            # the parent's vars: untouched
    eng.wait_for_var(busy)
    print("child", os.waitstatus_to_exitcode(status), "parent", done.version, mine.version)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("engine_name", ["threaded_per_device", "threaded", "naive"])
def test_fork_child_engine_adopts_the_parents_vars_as_they_were_at_the_fork(engine_name):
    # An NDArray made before a fork (a DataLoader's worker processes) carries a var of the
    # parent's engine: the child's engine stands in a var of its own, complete, or failed
    # with the error reading the parent's var raises, or failed because a write was pending.
    result = _run_child(_ADOPTION_CHILD, env={"MXKIT_ENGINE": engine_name})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["child", "0", "parent", "1", "0"]


def test_interpreter_exit_runs_pending_operations():
    result = _run_child("""
        import time
        import mxkit.engine as engine
        eng = engine.get()
        var = eng.new_var()
        for i in range(20):
            eng.push(lambda i=i: (time.sleep(0.01), print("op", i, flush=True)), writes=(var,))
        # a pending op that pushes its own follow-up while the interpreter exits
        eng.push(lambda: eng.push(lambda: print("follow-up", flush=True), writes=(var,)), writes=(var,))
        # no wait: the interpreter exits with 21 pending operations
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:21] == [f"op {i}" for i in range(20)] + ["follow-up"]


def test_interpreter_exit_does_not_hang_on_a_stuck_operation():
    started = time.monotonic()
    result = _run_child("""
        import threading
        import mxkit.engine as engine
        eng = engine.get()
        var = eng.new_var()
        eng.push(lambda: threading.Event().wait(), writes=(var,))  # never finishes
        eng.push(lambda: print("never"), writes=(var,))
        print("leaving", flush=True)
    """, env={"MXKIT_ENGINE_EXIT_TIMEOUT": "0.5"}, timeout=30)
    assert time.monotonic() - started < 20
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["leaving"]
    assert "Fatal" not in result.stderr and "Segmentation" not in result.stderr


def test_engine_error_on_missing_extension_is_clear(monkeypatch):
    import builtins

    from mxkit.engine import threaded

    real_import = builtins.__import__

    def no_extension(name, *args, **kwargs):
        if name == "mxkit.engine._threaded":
            raise ImportError("no compiled module")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_extension)
    with pytest.raises(EngineError, match=r"compiled module mxkit\.engine\._threaded is missing"):
        threaded.make_threaded_engine()
