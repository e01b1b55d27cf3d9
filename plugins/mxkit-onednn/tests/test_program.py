"""The program cache: one build per shape, scratchpads and workspace allocated once and reused, the least
recently used program evicted first, and the fastest candidate kept."""

from __future__ import annotations

import threading

import numpy as np
from onednn_harness import needs_onednn, run

pytestmark = needs_onednn

PARAMS = dict(kernel=(3, 3), num_filter=8, pad=(1, 1), no_bias=True)


def test_a_shape_builds_once_and_later_calls_allocate_nothing(monkeypatch):
    from mxkit_onednn import program

    cache = program.ProgramCache()
    cache.only = "blocked"
    monkeypatch.setattr(program, "PROGRAMS", cache)
    monkeypatch.setattr("mxkit_onednn.conv.PROGRAMS", cache)
    x = np.random.default_rng(0).standard_normal((2, 16, 9, 9)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((8, 16, 3, 3)).astype(np.float32)
    first = run("Convolution", [x, w], **PARAMS)[0]
    (key, built), = cache._programs.items()
    scratchpads = [primitive.scratchpad for primitive, _ in built.steps]
    workspace = program.thread_workspace(0)
    allocations = []
    real_empty = np.empty
    caller = threading.get_ident()

    def counting_empty(*args, **kwargs):
        # numpy.empty is patched process-wide: count only this thread's calls (an engine worker
        # finishing an earlier test's operation may allocate meanwhile)
        if threading.get_ident() == caller:
            allocations.append(args)
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(program.np, "empty", counting_empty)
    again = run("Convolution", [x, w], **PARAMS)[0]
    assert cache.builds == 1 and cache._programs[key] is built
    assert [primitive.scratchpad for primitive, _ in built.steps] == scratchpads
    assert program.thread_workspace(0) is workspace and not allocations
    np.testing.assert_array_equal(first, again)
    assert built.workspace_bytes > 0  # the blocked layout's operands live in the workspace


def test_least_recently_used_programs_go_first():
    from mxkit_onednn.program import Program, ProgramCache

    cache = ProgramCache(capacity=2)
    ran = []

    class Recorder(Program):
        def run(self, inputs, outputs):
            ran.append(self)

    for key in ("a", "b", "a", "c"):
        cache.run(key, {"only": Recorder}, [], [])
    assert list(cache._programs) == ["a", "c"] and cache.builds == 3 and len(ran) == 4


def test_the_fastest_candidate_is_kept_and_the_replaced_kernel_is_one(monkeypatch):
    from mxkit_onednn import program
    from mxkit_onednn.program import FALLBACK, Program, ProgramCache

    clock = [0.0]  # a clock that only the slow candidate moves: no test depends on real time
    monkeypatch.setattr(program.time, "perf_counter", lambda: clock[0])

    class Slow(Program):
        def run(self, inputs, outputs):
            clock[0] += 1.0

    calls = []
    cache = ProgramCache()
    cache.run("k", {"slow": Slow}, [], [], fallback=lambda i, o: calls.append(1))
    assert cache._programs["k"] is FALLBACK and cache.chosen() == {"k": "fallback"}
    cache.run("k", {"slow": Slow}, [], [], fallback=lambda i, o: calls.append(2))
    assert calls[-1] == 2


def test_a_later_candidate_must_win_by_the_margin(monkeypatch):
    from mxkit_onednn import program
    from mxkit_onednn.program import MARGIN, Program, fastest

    clock = [0.0]
    monkeypatch.setattr(program.time, "perf_counter", lambda: clock[0])

    def taking(seconds):
        class Timed(Program):
            def run(self, inputs, outputs):
                clock[0] += seconds
        return Timed()

    first, close, clearly = taking(1.0), taking(MARGIN + 0.05), taking(MARGIN - 0.05)
    assert fastest([first, close], [], []) is first
    assert fastest([first, close, clearly], [], []) is clearly
