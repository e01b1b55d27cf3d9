"""Turn the engine's raw profile records into Chrome trace event format JSON.

The format is the one chrome://tracing and Perfetto open ("Trace Event Format"):
a JSON object ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` whose events are

- ``"X"`` complete events, one per engine operation: ``pid`` = the device (a process
  track named by an ``"M"`` ``process_name`` event), ``tid`` = the worker thread that ran
  it (named by an ``"M"`` ``thread_name`` event), ``ts``/``dur`` in microseconds since
  the profiler started, and ``args`` with the push time, the queueing delay, the var ids
  read and written, the engine, the push sequence number and whether it failed;
- ``"b"``/``"e"`` async events for asynchronous operations (``push_async``), which end
  on another thread and would not nest on their worker's track;
- ``"s"``/``"f"`` flow events (same ``id``) from an operation to each operation that
  waited for one of its writes and was granted that var by its completion;
- ``"C"`` counter events ``memory`` per device: bytes in use by kind;
- ``"X"`` slices (``cat`` ``"scope"``, ``"task"``, ``"frame"``, ``"event"``), ``"i"``
  markers and ``"C"`` counters recorded from Python, on a ``host`` process track.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

KIND_NAMES = {0: "sync", 1: "async", 3: "delete_var"}
HOST = "host"
_POOL_LABEL = re.compile(r"^([a-z_]+?)(\d+)(-copy)?$")


def device_of_pool(label: Any) -> str:
    """The device track of a pool label: ``"cpu0"`` -> ``"cpu(0)"``, ``"gpu1-copy"`` -> ``"gpu(1)"``.

    Naive-engine records carry the device string itself (``"cpu(0)"``), returned as is.
    """
    text = str(label)
    match = _POOL_LABEL.match(text)
    if match:
        return f"{match.group(1)}({match.group(2)})"
    if text == "shared":
        return "all devices (threaded engine)"
    if text == "priority":
        return "priority pool"
    return text


def op_name(name: Any, scope: Any) -> str:
    """An operation's name with its profiler scope as prefix (``"layer1:dot"``)."""
    text = str(name)
    return text if scope is None else f"{scope}{text}"


def _us(t_ns: int, epoch_ns: int) -> float:
    return round((t_ns - epoch_ns) / 1000.0, 3)


class _Tracks:
    """Small stable integer ids for devices (pid) and threads (tid), with their names."""

    def __init__(self, thread_names: dict[int, str]) -> None:
        self.thread_names = thread_names
        self.pids: dict[str, int] = {}
        self.tids: dict[int, int] = {}
        self.named: set[tuple[int, int]] = set()
        self.metadata: list[dict[str, Any]] = []

    def pid(self, device: str) -> int:
        pid = self.pids.get(device)
        if pid is None:
            pid = self.pids[device] = len(self.pids) + 1
            self.metadata.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                  "args": {"name": device}})
            self.metadata.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                                  "args": {"sort_index": pid}})
        return pid

    def tid(self, pid: int, ident: int) -> int:
        tid = self.tids.get(ident)
        if tid is None:
            tid = self.tids[ident] = len(self.tids) + 1
        if (pid, tid) not in self.named:
            self.named.add((pid, tid))
            name = self.thread_names.get(ident, f"thread {ident}")
            self.metadata.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                                  "args": {"name": name}})
        return tid


def thread_names(worker_names: dict[int, str]) -> dict[int, str]:
    """Names of the threads by ident: engine workers (even finished) and live threads."""
    names = dict(worker_names)
    for thread in threading.enumerate():
        if thread.ident is not None:
            names.setdefault(thread.ident, thread.name)
    return names


def build_trace(ops: Iterable[tuple[Any, ...]], flows: Iterable[tuple[Any, ...]],
                pool_labels: dict[tuple[int, int], str], names: dict[int, str], host_events: Iterable[dict[str, Any]],
                memory_events: Iterable[tuple[int, str, str, int]], epoch_ns: int) -> dict[str, Any]:
    """The trace object of the given records (see the module docstring for the format).

    Parameters
    ----------
    ops, flows
        Records of the engines (format in ``mxkit.engine._core``).
    pool_labels
        (engine id, pool index) -> pool label.
    names
        Thread ident -> thread name.
    host_events
        Events recorded from Python, with ``"t_ns"`` (and ``"end_ns"`` for slices) and
        ``"ident"`` (thread) in place of ``ts``/``dur``/``tid``.
    memory_events
        (t_ns, device, kind, bytes in use of that kind after it).
    epoch_ns
        The time that becomes ``ts`` 0.
    """
    tracks = _Tracks(names)
    events: list[dict[str, Any]] = []
    placed: dict[tuple[int, int], tuple[int, int, int]] = {}  # (engine, seq) -> (pid, tid, t_start)
    for (core, seq, name, scope, kind, pool, t_push, t_start, t_end, ident, reads, writes, failed) in ops:
        device = device_of_pool(pool_labels.get((core, pool), pool) if core >= 0 else pool)
        pid = tracks.pid(device)
        tid = tracks.tid(pid, ident)
        placed[(core, seq)] = (pid, tid, t_start)
        args = {"push_us": _us(t_push, epoch_ns), "queue_us": round((t_start - t_push) / 1000.0, 3),
                "reads": list(reads), "writes": list(writes), "engine": core, "seq": seq,
                "kind": KIND_NAMES.get(kind, str(kind)), "failed": bool(failed)}
        label = op_name(name, scope)
        if kind == 1:  # asynchronous: may end on another thread, after later ops of its worker
            common = {"name": label, "cat": "async_operator", "id": f"{core}:{seq}", "pid": pid, "tid": tid}
            events.append({**common, "ph": "b", "ts": _us(t_start, epoch_ns), "args": args})
            events.append({**common, "ph": "e", "ts": _us(t_end, epoch_ns)})
        else:
            events.append({"name": label, "cat": "operator", "ph": "X", "ts": _us(t_start, epoch_ns),
                           "dur": round((t_end - t_start) / 1000.0, 3), "pid": pid, "tid": tid, "args": args})
    flow_id = 0
    for core, producer, consumer, var_id in flows:
        source, target = placed.get((core, producer)), placed.get((core, consumer))
        if source is None or target is None:
            continue  # one side was dropped (a dumps(reset=True) between them)
        flow_id += 1
        events.append({"name": "dependency", "cat": "dependency", "ph": "s", "id": flow_id,
                       "ts": _us(source[2], epoch_ns), "pid": source[0], "tid": source[1], "args": {"var": var_id}})
        events.append({"name": "dependency", "cat": "dependency", "ph": "f", "bp": "e", "id": flow_id,
                       "ts": _us(target[2], epoch_ns), "pid": target[0], "tid": target[1], "args": {"var": var_id}})
    totals: dict[str, dict[str, int]] = {}
    for t_ns, device, kind, in_use in memory_events:
        series = totals.setdefault(device, {})
        series[kind] = in_use
        events.append({"name": "memory", "cat": "memory", "ph": "C", "ts": _us(t_ns, epoch_ns),
                       "pid": tracks.pid(device), "args": dict(series)})
    for event in host_events:
        event = dict(event)
        pid = tracks.pid(event.pop("device", HOST))
        ident = event.pop("ident", None)
        t_ns = event.pop("t_ns")
        event["ts"] = _us(t_ns, epoch_ns)
        end_ns = event.pop("end_ns", None)
        if end_ns is not None:
            event["dur"] = round((end_ns - t_ns) / 1000.0, 3)
        event["pid"] = pid
        if ident is not None:
            event["tid"] = tracks.tid(pid, ident)
        events.append(event)
    return {"traceEvents": tracks.metadata + events, "displayTimeUnit": "ms",
            "otherData": {"producer": "mxkit.engine.profiler", "clock": "CLOCK_MONOTONIC, us since start"}}
