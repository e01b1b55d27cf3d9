"""Threaded engines: delete_var, concurrent pushers, priorities, pools, waits, misuse."""

import _thread
import os
import threading
import time

import mxkit.engine as engine
import pytest
from mxkit.core import Context, cpu, gpu
from mxkit.core.errors import EngineError


def test_reads_between_writes_run_concurrently(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    both_inside = threading.Barrier(2, timeout=5)
    log = []

    def reader(i):
        def op():
            both_inside.wait()  # deadlocks (BrokenBarrierError) unless the two reads overlap
            log.append(("read", i))
        return op

    eng.push(lambda: log.append(("write", 0)), writes=(var,))
    eng.push(reader(1), reads=(var,))
    eng.push(reader(2), reads=(var,))
    eng.push(lambda: log.append(("write", 1)), writes=(var,))
    eng.wait_for_var(var)
    assert log[0] == ("write", 0) and log[-1] == ("write", 1)
    assert sorted(log[1:3]) == [("read", 1), ("read", 2)]


def test_delete_var_runs_after_every_pending_op(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    log = []
    gate = threading.Event()
    eng.push(lambda: (gate.wait(5), log.append("write")), writes=(var,))
    eng.push(lambda: log.append("read"), reads=(var,))
    eng.delete_var(var, on_delete=lambda: log.append("deleted"))
    with pytest.raises(EngineError, match="deleted with delete_var"):
        eng.push(lambda: None, reads=(var,))
    with pytest.raises(EngineError, match="deleted with delete_var"):
        eng.delete_var(var)
    assert log == []
    gate.set()
    eng.wait_all()
    assert log == ["write", "read", "deleted"]


def test_delete_var_runs_on_delete_even_after_an_error(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    freed = []
    eng.push(lambda: 1 / 0, writes=(var,), name="divide")
    eng.delete_var(var, on_delete=lambda: freed.append(True))
    with pytest.raises(EngineError, match="'divide' failed: ZeroDivisionError"):
        eng.wait_all()
    assert freed == [True]


def test_push_from_eight_threads_at_once(threaded_engine):
    eng = threaded_engine
    shared = [eng.new_var() for _ in range(4)]
    counters = [0] * 4
    per_thread = 2000
    start = threading.Barrier(8)

    def pusher(t):
        start.wait()
        for i in range(per_thread):
            # every thread writes two shared vars in opposite orders: cycles would deadlock
            a, b = (t + i) % 4, (t + 2 * i + 1) % 4
            writes = (shared[a], shared[b]) if t % 2 else (shared[b], shared[a])

            def op(a=a, b=b):
                counters[a] += 1
                if b != a:
                    counters[b] += 1
            eng.push(op, writes=writes)

    threads = [threading.Thread(target=pusher, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 60
    while eng.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert eng.pending == 0, "pushes from several threads deadlocked the engine"
    eng.wait_all()
    # every write was serialised per var: no increment was lost to a race
    assert counters == [var.version for var in shared]
    assert sum(counters) == sum(2 if (t + i) % 4 != (t + 2 * i + 1) % 4 else 1
                                for t in range(8) for i in range(per_thread))


def test_higher_priority_runs_first_within_a_pool():
    eng = engine.create("threaded", num_workers=1)
    try:
        gate = threading.Event()
        order = []
        eng.push(lambda: gate.wait(5))  # occupy the only worker while the queue fills
        time.sleep(0.05)
        for priority in (0, 3, -1, 7, 3, 0):
            eng.push(lambda p=priority: order.append(p), priority=priority)
        gate.set()
        eng.wait_all()
        assert order == [7, 3, 3, 0, 0, -1]
    finally:
        eng.shutdown()


def test_per_device_pools_and_the_priority_pool():
    eng = engine.create("threaded_per_device", num_workers=1)
    try:
        names = {}

        def record(key):
            names[key] = threading.current_thread().name

        for key, ctx, priority, copy in [("cpu0", None, 0, False), ("cpu1", cpu(1), 0, False),
                                         ("prio", cpu(0), 5, False), ("gpu0", gpu(0), 0, False),
                                         ("gpu0copy", gpu(0), 0, True), ("pinned", Context("cpu_pinned", 1), 0, False)]:
            eng.push(lambda key=key: record(key), ctx=ctx, priority=priority, copy=copy)
        eng.wait_all()
        assert names["cpu0"].startswith("mxkit-engine-cpu0-")
        assert names["cpu1"].startswith("mxkit-engine-cpu1-")
        assert names["prio"].startswith("mxkit-engine-priority-")
        assert names["gpu0"].startswith("mxkit-engine-gpu0-")
        assert names["gpu0copy"].startswith("mxkit-engine-gpu0-copy-")
        assert names["pinned"].startswith("mxkit-engine-cpu1-")  # pinned host memory is the CPU's
        assert eng.num_pools == 5
    finally:
        eng.shutdown()


def test_threaded_engine_has_one_shared_pool():
    eng = engine.create("threaded", num_workers=2)
    try:
        seen = set()
        for ctx in (cpu(0), cpu(3), gpu(1)):
            eng.push(lambda: seen.add(threading.current_thread().name.rsplit("-", 1)[0]), ctx=ctx)
        eng.wait_all()
        assert seen == {"mxkit-engine-shared"}
        assert eng.num_pools == 1
    finally:
        eng.shutdown()


def test_cpu_workers_config_sets_the_pool_size(monkeypatch):
    monkeypatch.setenv("MXKIT_CPU_WORKERS", "3")
    eng = engine.create("threaded")
    try:
        assert eng.num_workers == 3
    finally:
        eng.shutdown()


def test_automatic_cpu_workers_follow_the_plugins(monkeypatch):
    from types import SimpleNamespace

    from mxkit.core import hookimpl, plugins

    @hookimpl
    def mxkit_cpu_workers():
        return 1

    monkeypatch.setenv("MXKIT_CPU_WORKERS", "0")
    plugins.register_plugin(SimpleNamespace(mxkit_cpu_workers=mxkit_cpu_workers), name="one-worker")
    try:
        eng = engine.create("threaded_per_device")
        try:
            assert eng.num_workers == 1
        finally:
            eng.shutdown()
    finally:
        plugins.unregister_plugin("one-worker")
    monkeypatch.setattr(plugins, "preferred_cpu_workers", lambda: None)
    eng = engine.create("threaded")
    try:
        assert eng.num_workers == len(os.sched_getaffinity(0))
    finally:
        eng.shutdown()


def test_waiting_inside_an_operation_is_refused(threaded_engine):
    eng = threaded_engine
    var, var_all, other = eng.new_var(), eng.new_var(), eng.new_var()
    gate = threading.Event()
    eng.push(lambda: gate.wait(5), writes=(other,))
    eng.push(lambda: eng.wait_for_var(other), writes=(var,), name="nested")
    eng.push(eng.wait_all, writes=(var_all,), name="nested_all")
    with pytest.raises(EngineError, match="wait_for_var\\(\\) inside an operation"):
        eng.wait_for_var(var)
    with pytest.raises(EngineError, match="wait_all\\(\\) inside an operation"):
        eng.wait_for_var(var_all)
    gate.set()
    eng.wait_all()  # both failures were reported by the waits above


def test_keyboard_interrupt_during_a_wait_returns_control(threaded_engine):
    eng = threaded_engine
    var = eng.new_var()
    gate = threading.Event()
    eng.push(lambda: gate.wait(10), writes=(var,))
    threading.Timer(0.2, _thread.interrupt_main).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        eng.wait_for_var(var)
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        eng.wait_all()
    assert time.monotonic() - started < 5
    gate.set()
    eng.wait_for_var(var)  # the engine is fine afterwards
    assert var.version == 1


def test_shutdown_waits_then_refuses_pushes():
    eng = engine.create("threaded", num_workers=2)
    var = eng.new_var()
    done = []
    for i in range(20):
        eng.push(lambda i=i: (time.sleep(0.001), done.append(i)), writes=(var,))
    eng.shutdown()
    assert done == list(range(20))
    with pytest.raises(EngineError, match="shut down"):
        eng.push(lambda: None)
    with pytest.raises(EngineError, match="shut down"):
        eng.new_var()
    eng.shutdown()  # twice is fine


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fn": None}, "needs a callable operation, got None"),
        ({"reads": (object(),)}, "vars made by this threaded"),
        ({"writes": {1}}, "writes must be a tuple or list of vars, got {1}"),
        ({"reads": 3}, "reads must be a tuple or list of vars, got 3"),
        ({"priority": "high"}, "priority must be an int"),
        ({"ctx": "gpu0", "priority": 0}, "ctx must be an mxkit.core.Context or None, got 'gpu0'"),
    ],
)
def test_bad_arguments_raise_engine_error(threaded_engine, kwargs, message):
    args = {"fn": lambda: None, **kwargs}
    with pytest.raises(EngineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        threaded_engine.push(**args)


def test_var_of_another_engine_is_refused(threaded_engine):
    other = engine.create("threaded", num_workers=1)
    try:
        foreign = other.new_var()
        with pytest.raises(EngineError, match="vars made by this threaded"):
            threaded_engine.push(lambda: None, writes=(foreign,))
        with pytest.raises(EngineError, match="vars made by this threaded"):
            threaded_engine.wait_for_var(foreign)
        with pytest.raises(EngineError, match="vars made by this threaded"):
            threaded_engine.wait_for_var("not a var")
    finally:
        other.shutdown()


@pytest.mark.parametrize("options", [{"num_workers": 0}, {"num_workers": 1.5}, {"priority_workers": -1}])
def test_bad_options_raise_engine_error(options):
    name, value = next(iter(options.items()))
    with pytest.raises(EngineError, match=f"{name} must be an int >= 1, got {value}"):
        engine.create("threaded_per_device", **options)


def test_a_dropped_engine_finishes_its_work_and_its_threads_leave():
    import gc

    before = threading.active_count()
    done = []
    for _ in range(3):
        eng = engine.create("threaded_per_device", num_workers=2)
        var = eng.new_var()
        eng.push(lambda: (time.sleep(0.05), done.append(1)), writes=(var,))
        del eng, var  # no wait, no shutdown
    gc.collect()
    deadline = time.monotonic() + 10
    while (threading.active_count() > before or len(done) < 3) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == [1, 1, 1]
    assert threading.active_count() == before
