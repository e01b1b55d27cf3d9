"""The engine profiler: trace format, one event per pushed op, pause/resume, dumps, errors.

Times are checked against the order the engine must respect (push <= start <= end), and
the aggregate table against the trace events it summarises.
"""

import json
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from mxkit.core.errors import ConfigError
from mxkit.engine import _core, _naive, profiler

from .conftest import _close, _make

EPS_US = 0.002  # the trace rounds times to the nanosecond


@pytest.fixture(autouse=True)
def fresh_profiler():
    profiler.reset()
    yield
    profiler.reset()


def op_events(trace):
    """name -> list of (start_us, end_us, event) of every engine operation in the trace."""
    out = {}
    begins = {}
    for event in trace["traceEvents"]:
        if event["ph"] == "X" and event["cat"] == "operator":
            out.setdefault(event["name"], []).append((event["ts"], event["ts"] + event["dur"], event))
        elif event["ph"] == "b":
            begins[event["id"]] = event
        elif event["ph"] == "e":
            begin = begins.pop(event["id"])
            out.setdefault(begin["name"], []).append((begin["ts"], event["ts"], begin))
    assert not begins, f"async begin events without an end: {begins}"
    return out


def record(eng, push_ops):
    profiler.set_config(profile_all=True)
    profiler.set_state("run")
    push_ops()
    eng.wait_all()
    profiler.set_state("stop")
    return profiler.trace()


def test_trace_file_is_valid_chrome_trace_json(threaded_engine, tmp_path):
    eng = threaded_engine
    a, b = eng.new_var(), eng.new_var()
    path = tmp_path / "trace.json"
    profiler.set_config(filename=str(path), profile_all=True)
    profiler.set_state("run")
    eng.push(lambda: time.sleep(0.002), writes=(a,), name="produce")
    eng.push(lambda: None, reads=(a,), writes=(b,), name="consume")
    eng.push_async(lambda done: done(), reads=(b,), name="later")
    eng.wait_all()
    profiler.dump()
    assert profiler.get_state() == "stop"  # dump(finished=True) ends the profile
    trace = json.loads(path.read_text())
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} <= {"X", "M", "s", "f", "b", "e", "C", "i"}
    process_names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    ops = [e for e in events if e["ph"] in ("X", "b") and e["cat"] in ("operator", "async_operator")]
    assert sorted(e["name"] for e in ops) == ["consume", "later", "produce"]
    for event in ops:
        assert isinstance(event["ts"], (int, float)) and event["pid"] in process_names
        assert process_names[event["pid"]] in ("cpu(0)", "all devices (threaded engine)")
        assert thread_names[(event["pid"], event["tid"])].startswith("mxkit-engine-")
        assert set(event["args"]) >= {"push_us", "reads", "writes", "engine", "seq", "kind"}
    by_name = {e["name"]: e for e in ops}
    assert by_name["produce"]["args"]["writes"] == [a.id] and by_name["produce"]["args"]["reads"] == []
    assert by_name["consume"]["args"]["reads"] == [a.id] and by_name["consume"]["args"]["writes"] == [b.id]
    assert by_name["later"]["args"]["kind"] == "async"
    # "consume" was pushed while "produce" slept: it waited for that write, an arrow joins them
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == finishes.keys() and starts
    pairs = set()
    for flow_id, start in starts.items():
        source = next(e for e in ops if e["ts"] == start["ts"] and e["tid"] == start["tid"])
        target = next(e for e in ops if e["ts"] == finishes[flow_id]["ts"] and e["tid"] == finishes[flow_id]["tid"])
        pairs.add((source["name"], target["name"], start["args"]["var"]))
    assert ("produce", "consume", a.id) in pairs


@pytest.mark.parametrize("engine_name", ["naive", "threaded", "threaded_per_device"])
def test_every_pushed_op_appears_once_in_time_order(engine_name):
    eng = _make(engine_name)
    try:
        vars_ = [eng.new_var() for _ in range(4)]

        def push_ops():
            for i in range(60):
                reads, writes = (vars_[i % 4],), (vars_[(i + 1) % 4],)
                if i % 7 == 0:
                    eng.push_async(lambda done: done(), reads=reads, writes=writes, name=f"op{i}")
                else:
                    eng.push(lambda: None, reads=reads, writes=writes, name=f"op{i}")
            eng.delete_var(vars_[0])

        trace = record(eng, push_ops)
    finally:
        _close(eng)
    events = op_events(trace)
    assert sorted(events) == sorted([f"op{i}" for i in range(60)] + ["delete_var"])
    for name, occurrences in events.items():
        assert len(occurrences) == 1, name
        start, end, event = occurrences[0]
        assert event["args"]["push_us"] <= start + EPS_US <= end + 2 * EPS_US, (name, event)
        assert event["args"]["queue_us"] >= 0


def test_failed_and_skipped_ops_are_marked(threaded_engine):
    eng = threaded_engine
    v = eng.new_var()

    def boom():
        raise ValueError("boom")

    def push_ops():
        eng.push(boom, writes=(v,), name="fails")
        eng.push(lambda: None, reads=(v,), name="skipped")
        eng.push(lambda: None, name="fine")

    with pytest.raises(Exception, match="boom"):
        record(eng, push_ops)
    events = op_events(profiler.trace())
    assert events["fails"][0][2]["args"]["failed"] is True
    assert events["skipped"][0][2]["args"]["failed"] is True
    assert events["fine"][0][2]["args"]["failed"] is False


@pytest.mark.parametrize("engine_name", ["naive", "threaded_per_device"])
def test_pause_and_resume_leave_out_the_ops_pushed_in_between(engine_name):
    eng = _make(engine_name)
    try:
        def push_ops():
            eng.push(lambda: None, name="before")
            profiler.pause()
            assert not profiler.is_recording()
            eng.push(lambda: None, name="paused")
            eng.wait_all()
            profiler.resume()
            eng.push(lambda: None, name="after")

        trace = record(eng, push_ops)
    finally:
        _close(eng)
    assert sorted(op_events(trace)) == ["after", "before"]


def test_an_op_pushed_while_recording_is_recorded_even_if_it_ends_after_stop(threaded_engine):
    eng = threaded_engine
    gate = threading.Event()
    profiler.set_state("run")
    eng.push(gate.wait, name="slow")
    profiler.set_state("stop")
    eng.push(lambda: None, name="unrecorded")
    gate.set()
    eng.wait_all()
    assert sorted(op_events(profiler.trace())) == ["slow"]


@pytest.mark.parametrize("engine_name", ["naive", "threaded", "threaded_per_device"])
def test_profiler_off_records_nothing(engine_name):
    eng = _make(engine_name)
    try:
        v = eng.new_var()
        for i in range(50):
            eng.push(lambda: None, writes=(v,), name=f"op{i}")
        eng.push_async(lambda done: done(), reads=(v,), name="async")
        eng.wait_all()
    finally:
        _close(eng)
    # straight from the engines' buffers: nothing was recorded at all
    assert _core._take_profile() == ([], [])
    assert _naive._take_profile() == ([], [])
    trace = profiler.trace()
    assert not [e for e in trace["traceEvents"] if e["ph"] != "M"]
    assert json.loads(profiler.dumps(format="json"))["Time"]["operator"] == {}


def test_dumps_aggregates_match_the_trace_events(threaded_engine):
    eng = threaded_engine
    durations = {"short": 0.0005, "medium": 0.002, "long": 0.004}
    counts = {"short": 5, "medium": 3, "long": 1}

    def push_ops():
        for name, count in counts.items():
            for _ in range(count):
                eng.push(lambda s=durations[name]: time.sleep(s), name=name)

    trace = record(eng, push_ops)
    events = op_events(trace)
    stats = json.loads(profiler.dumps(format="json"))["Time"]["operator"]
    assert set(stats) == set(counts)
    for name, occurrences in events.items():
        times_ms = [(end - start) / 1000.0 for start, end, _ in occurrences]
        entry = stats[name]
        assert entry["Count"] == counts[name] == len(times_ms)
        assert entry["Total"] == pytest.approx(sum(times_ms), abs=1e-5)
        assert entry["Min"] == pytest.approx(min(times_ms), abs=1e-5)
        assert entry["Max"] == pytest.approx(max(times_ms), abs=1e-5)
        assert entry["Avg"] == pytest.approx(sum(times_ms) / len(times_ms), abs=1e-5)
        assert entry["Min"] >= durations[name] * 1000 * 0.9  # the sleep is inside the op's time
    for sort_by, column in (("total", "Total"), ("avg", "Avg"), ("min", "Min"), ("max", "Max"),
                            ("count", "Count")):
        for ascending in (False, True):
            rows = list(json.loads(profiler.dumps(format="json", sort_by=sort_by,
                                                  ascending=ascending))["Time"]["operator"].values())
            values = [row[column] for row in rows]
            assert values == sorted(values, reverse=not ascending), (sort_by, ascending)
    table = profiler.dumps(sort_by="count")
    lines = [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0] in counts]
    assert lines == ["short", "medium", "long"]
    profiler.dumps(reset=True)
    assert json.loads(profiler.dumps(format="json"))["Time"]["operator"] == {}


def test_scope_prefixes_the_ops_pushed_inside(any_engine):
    eng = any_engine

    def push_ops():
        with profiler.scope("outer"):
            eng.push(lambda: None, name="a")
            with profiler.scope("inner:", append_mode=True):
                eng.push(lambda: None, name="b")
            with profiler.scope("other"):
                eng.push(lambda: None, name="c")
            eng.push(lambda: None, name="d")
        eng.push(lambda: None, name="e")

    trace = record(eng, push_ops)
    assert sorted(op_events(trace)) == ["e", "other:c", "outer:a", "outer:d", "outer:inner:b"]
    scopes = sorted(e["name"] for e in trace["traceEvents"] if e.get("cat") == "scope")
    assert scopes == ["other", "outer", "outer:inner"]


def test_naive_ops_are_on_the_callers_thread_and_device(tmp_path):
    from mxkit.core.context import Context

    eng = _make("naive")
    trace = record(eng, lambda: eng.push(lambda: None, name="op", ctx=Context("cpu", 3)))
    (_start, _end, event), = op_events(trace)["op"]
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names[event["pid"]] == "cpu(3)"
    assert threads[(event["pid"], event["tid"])] == threading.current_thread().name


def test_user_objects_record_slices_counters_and_markers():
    domain = profiler.Domain("training")
    counter = domain.new_counter("batches", 10)
    profiler.set_state("run")
    with domain.new_task("epoch"):
        counter += 5
        counter -= 2
        domain.new_marker("checkpoint").mark("global")
    frame = domain.new_frame("iteration")
    frame.start()
    frame.stop()
    event = profiler.Event("io")
    event.start()
    event.stop()
    profiler.set_state("stop")
    counter.increment()  # not recorded: stopped
    events = [e for e in profiler.trace()["traceEvents"] if e["ph"] != "M"]
    assert [e["args"]["batches"] for e in events if e["ph"] == "C"] == [15, 13]
    assert counter.value == 14
    assert [(e["name"], e["s"]) for e in events if e["ph"] == "i"] == [("checkpoint", "g")]
    slices = {e["name"]: e for e in events if e["ph"] == "X"}
    assert set(slices) == {"epoch", "iteration", "io"}
    assert slices["epoch"]["cat"] == "training" and slices["io"]["cat"] == "event"
    assert all(e["dur"] >= 0 for e in slices.values())


def test_bad_input_raises_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"set_state\('go'\).*'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(ConfigError, match=r"sort_by='median'.*'total', 'avg', 'min', 'max', 'count'"):
        profiler.dumps(sort_by="median")
    with pytest.raises(ConfigError, match=r"format='xml'"):
        profiler.dumps(format="xml")
    missing = tmp_path / "no" / "such" / "dir" / "trace.json"
    with pytest.raises(ConfigError, match=r"directory .*no/such/dir.* does not exist"):
        profiler.set_config(filename=str(missing))
    with pytest.raises(ConfigError, match=r"is a directory"):
        profiler.set_config(filename=str(tmp_path))
    with pytest.raises(ConfigError, match=r"unknown option 'profile_everything'.*profile_all"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(ConfigError, match=r"profile_all='yes'.*True or False"):
        profiler.set_config(profile_all="yes")
    with pytest.raises(ConfigError, match=r"mark\(scope='galaxy'\)"):
        profiler.Domain("d").new_marker("m").mark("galaxy")
    with pytest.raises(ConfigError, match=r"non-empty str"):
        with profiler.scope(""):
            pass
    with pytest.raises(ConfigError, match="needs an int"):
        profiler.Domain("d").new_counter("c").set_value(1.5)
    assert profiler.get_config()["filename"] == "profile.json"  # nothing half-applied


def test_autostart_profiles_a_whole_run_and_dumps_at_exit(tmp_path):
    path = tmp_path / "run.json"
    program = textwrap.dedent("""
        import mxkit.engine as engine
        eng = engine.get()
        v = eng.new_var()
        for i in range(5):
            eng.push(lambda: None, writes=(v,), name="step")
    """)
    env = {"MXKIT_PROFILER_AUTOSTART": "1", "MXKIT_PROFILER_FILENAME": str(path), "PATH": ""}
    subprocess.run([sys.executable, "-c", program], check=True, env=env, cwd=tmp_path, timeout=60)
    trace = json.loads(path.read_text())
    assert len(op_events(trace)["step"]) == 5  # pushed without a wait: the exit dump waited for them


def test_mxnet_1_0_names_map_to_the_options(tmp_path):
    profiler.profiler_set_config(mode="imperative", filename=str(tmp_path / "p.json"))
    config = profiler.get_config()
    assert (config["profile_imperative"], config["profile_symbolic"]) == (True, False)
    assert config["filename"] == str(tmp_path / "p.json")
    profiler.profiler_set_state("run")
    assert profiler.is_recording()
    profiler.profiler_set_state("stop")
    with pytest.raises(ConfigError, match=r"mode='everything'.*'symbolic'"):
        profiler.profiler_set_config(mode="everything")


def test_vars_are_listed_once_and_a_var_read_and_written_counts_as_written(any_engine):
    eng = any_engine
    a, b, c = eng.new_var(), eng.new_var(), eng.new_var()

    def unnamed_work():
        pass

    trace = record(eng, lambda: (eng.push(lambda: None, reads=(a, b, a), writes=(b, c, c), name="mixed"),
                                 eng.push(unnamed_work, reads=(c,))))
    events = op_events(trace)
    args = events["mixed"][0][2]["args"]
    assert (args["reads"], args["writes"]) == ([a.id], [b.id, c.id])
    (_, _, unnamed), = events[unnamed_work.__qualname__]
    assert (unnamed["args"]["reads"], unnamed["args"]["writes"]) == ([c.id], [])


def test_each_device_is_a_process_and_each_worker_a_thread_track():
    from mxkit.core.context import Context

    eng = _make("threaded_per_device")
    try:
        def push_ops():
            for device_id in (0, 1):
                for i in range(4):
                    eng.push(lambda: None, ctx=Context("cpu", device_id), name=f"dev{device_id}-{i}")
            eng.push(lambda: None, priority=5, name="urgent")

        trace = record(eng, push_ops)
    finally:
        _close(eng)
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    for name, ((_, _, event),) in op_events(trace).items():
        device = processes[event["pid"]]
        thread = threads[(event["pid"], event["tid"])]
        if name == "urgent":
            assert (device, thread.rsplit("-", 1)[0]) == ("priority pool", "mxkit-engine-priority")
        else:
            device_id = name[3]
            assert (device, thread.rsplit("-", 1)[0]) == (f"cpu({device_id})", f"mxkit-engine-cpu{device_id}")


def test_dumps_json_has_mxnets_sections_for_domains_and_counters():
    domain = profiler.Domain("training")
    counter = domain.new_counter("batches", 10)
    profiler.set_state("run")
    with domain.new_task("epoch"):
        counter += 5
        counter -= 2
    event = profiler.Event("io")
    event.start()
    event.stop()
    profiler.set_state("stop")
    dumped = json.loads(profiler.dumps(format="json"))
    assert set(dumped) == {"Time", "Memory", "Unit"} and dumped["Unit"] == {"Time": "ms", "Memory": "kB"}
    assert dumped["Time"]["training"]["epoch"]["Count"] == 1 and dumped["Time"]["event"]["io"]["Count"] == 1
    assert dumped["Memory"]["training"]["batches"] == {"Count": 2, "Min": 13.0, "Max": 15.0, "Avg": 14.0}
    for sort_by, column in (("min", "Min"), ("max", "Max"), ("avg", "Avg"), ("count", "Count")):
        for ascending in (False, True):
            for section in ("Time", "Memory"):
                for rows in json.loads(profiler.dumps(format="json", sort_by=sort_by, ascending=ascending))[
                        section].values():
                    values = [row[column] for row in rows.values()]
                    assert values == sorted(values, reverse=not ascending)
