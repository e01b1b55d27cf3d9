"""The program cache: one build per shape, the workspace (with the scratchpads) allocated once and reused, the least
recently used program evicted first, and the fastest candidate kept."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mxkit.ndarray.registry import get_registry
from onednn_harness import UNIT, assert_within, needs_onednn, run, sum_bound

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
    workspace = program.WORKSPACES.borrow(0)
    program.WORKSPACES.give_back(workspace)
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
    lent = program.WORKSPACES.borrow(0)
    program.WORKSPACES.give_back(lent)
    assert lent is workspace and not allocations
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
    monkeypatch.setattr(program.time, "process_time", lambda: clock[0])

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
    monkeypatch.setattr(program.time, "process_time", lambda: clock[0])

    def taking(seconds):
        class Timed(Program):
            def run(self, inputs, outputs):
                clock[0] += seconds
        return Timed()

    first, close, clearly = taking(1.0), taking(MARGIN + 0.05), taking(MARGIN - 0.05)
    assert fastest([first, close], [], []) is first
    assert fastest([first, close, clearly], [], []) is clearly


def test_candidates_are_timed_after_their_first_runs(monkeypatch):
    """A primitive's first runs pay for what it sets up once: a candidate slow in as many runs as are timed,
    and faster than the others after, is chosen (timed cold, it lost every time)."""
    from mxkit_onednn import program
    from mxkit_onednn.program import TRIALS, WARMUP_RUNS, Program, fastest

    assert WARMUP_RUNS >= 1
    clock = [0.0]
    monkeypatch.setattr(program.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(program.time, "process_time", lambda: clock[0])

    def taking(*seconds):  # each run's time in turn, the last one from then on
        runs = []

        class Timed(Program):
            def run(self, inputs, outputs):
                clock[0] += seconds[min(len(runs), len(seconds) - 1)]
                runs.append(1)
        return Timed()

    steady, warming = taking(1.0), taking(*[5.0] * TRIALS, 0.5)
    assert fastest([steady, warming], [], []) is warming


def test_a_candidate_counts_the_lesser_of_its_wall_and_cpu_time(monkeypatch):
    # a run kept off the cores by other load takes long on the wall clock and little CPU time; a run on several
    # idle cores takes more CPU time than wall time: each counts its lesser time
    from mxkit_onednn import program
    from mxkit_onednn.program import Program, cost, fastest

    wall, cpu = [0.0], [0.0]
    monkeypatch.setattr(program.time, "perf_counter", lambda: wall[0])
    monkeypatch.setattr(program.time, "process_time", lambda: cpu[0])

    def taking(wall_seconds, cpu_seconds):
        class Timed(Program):
            def run(self, inputs, outputs):
                wall[0] += wall_seconds
                cpu[0] += cpu_seconds
        return Timed()

    assert cost(3.0, 1.0) == 1.0 and cost(1.0, 2.0) == 1.0
    descheduled, busy = taking(10.0, 1.0), taking(2.0, 2.0)
    assert fastest([busy, descheduled], [], []) is descheduled
    parallel, serial = taking(1.0, 2.0), taking(1.5, 1.5)
    assert fastest([serial, parallel], [], []) is parallel


def test_the_workspace_pool_keeps_one_buffer_per_concurrent_call_and_grows_it():
    from mxkit_onednn.program import WorkspacePool

    pool = WorkspacePool()
    with pool.lend(50) as first:
        assert first.nbytes >= 50 and first.ctypes.data % 64 == 0
    with pool.lend(100) as second:  # none fits: the free one is replaced
        assert second.nbytes >= 100 and second is not first
        with pool.lend(50) as third:  # two calls at once: two buffers, the new one as large as the largest call
            assert not np.shares_memory(second, third) and third.nbytes == second.nbytes
    assert pool.nbytes == second.nbytes + third.nbytes
    for _ in range(3):  # any free buffer now fits any call, in any order: nothing more is allocated
        with pool.lend(100) as one, pool.lend(80) as other:
            assert {id(one), id(other)} == {id(second), id(third)}
    with pool.lend(1000) as larger:  # none fits: a free one is replaced
        assert larger.nbytes >= 1000
    assert sorted(b.nbytes for b in pool._free) == sorted([second.nbytes, larger.nbytes])


def test_a_program_over_the_workspace_budget_runs_in_chunks_with_the_same_result(monkeypatch):
    from mxkit_onednn import conv, program

    x = np.random.default_rng(0).standard_normal((5, 16, 9, 9)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((8, 16, 3, 3)).astype(np.float32)
    results, programs = [], []
    for budget in (1 << 30, 1):  # the whole batch at once, then one sample at a time
        cache = program.ProgramCache()
        cache.only = "blocked"
        monkeypatch.setattr(program, "WORKSPACE_BYTES", budget)
        monkeypatch.setattr(conv, "PROGRAMS", cache)
        results.append(run("Convolution", [x, w], **PARAMS)[0])
        (built,) = cache._programs.values()
        programs.append(built)
    if programs[0].workspace_bytes == 0:  # oneDNN chose numpy's layout here: nothing to chunk
        return
    assert isinstance(programs[1], program.Chunked) and programs[1].per_chunk == 1
    # a chunk's workspace: one sample's reordered activations (and the filters), not five
    assert programs[1].workspace_bytes < programs[0].workspace_bytes
    # the primitive of one sample may block its sums differently: sums of 144 products of unit normals
    # in float32 differ by far less than 1e-4
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fused", [False, True])
def test_chunks_of_a_forward_share_one_reorder_of_the_filters(monkeypatch, fused):
    """A forward in chunks reorders the filters once per call (a prologue), not once per chunk; the result is the
    whole batch's (and mxkit-cpu's) within float32 rounding."""
    from mxkit_onednn import conv, program
    from mxkit_onednn.library import load

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16, 9, 9)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    addend = rng.standard_normal((5, 32, 9, 9)).astype(np.float32)
    name, inputs = ("_FusedConvolution", [x, w, addend]) if fused else ("Convolution", [x, w])
    params = dict(PARAMS, num_filter=32, **(dict(act_type="relu", with_sum=True) if fused else {}))
    results, programs = [], []
    for budget in ("whole", "chunks"):
        cache = program.ProgramCache()
        cache.only = "blocked"
        monkeypatch.setattr(program, "WORKSPACE_BYTES", 1 << 30 if budget == "whole" else
                            programs[0].lent_bytes - 1)
        monkeypatch.setattr(conv, "PROGRAMS", cache)
        results.append(run(name, inputs, **params)[0])
        (built,) = cache._programs.values()
        programs.append(built)
        if budget == "whole" and (built.workspace_bytes == 0 or built.weights_md.same_as(load().plain_md(w.shape))):
            pytest.skip("oneDNN keeps numpy's layouts here: nothing to chunk or reorder")
    prepared = programs[1]
    assert isinstance(prepared, program.Prepared) and prepared.chunked.per_chunk < x.shape[0]
    assert prepared.lent_bytes <= programs[0].lent_bytes - 1  # within the budget, filters included
    for chunk in prepared.chunked.programs.values():
        # the convolution reads the prepared filters; no reorder (a step of two arrays) of its own reads them
        assert [len(refs) > 2 for _, refs in chunk.steps if ("in", 1) in refs] == [True]
    # each output sums 144 products of unit normals; primitives of other batch sizes may block the sums differently
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-4)
    reference = run(name, inputs, "cpu", **params)[0]
    np.testing.assert_allclose(results[1], reference, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("layout", ["blocked", "plain"])
@pytest.mark.parametrize("no_bias", [True, False])
def test_a_gradient_program_over_the_workspace_budget_runs_in_chunks_that_sum_the_weight_gradient(monkeypatch, layout,
                                                                                                 no_bias):
    """Over the budget a convolution's gradients run in chunks of samples: the data gradient chunk by chunk,
    the weight and bias gradients (sums over the batch) written by the first chunk and added to by the others.
    With no room for one sample the program is refused and the replaced kernel serves."""
    from mxkit_onednn import conv, program

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16, 9, 9)).astype(np.float32)
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    out_grad = rng.standard_normal((5, 8, 9, 9)).astype(np.float32)
    params = dict(PARAMS, no_bias=no_bias)
    results, programs, caches = [], [], []
    whole_bytes = None
    for budget in ("whole", "less", "none"):
        cache = program.ProgramCache()
        cache.only = layout
        monkeypatch.setattr(program, "WORKSPACE_BYTES", {"whole": 1 << 30, "less": (whole_bytes or 1) - 1,
                                                         "none": 1}[budget])
        monkeypatch.setattr(conv, "PROGRAMS", cache)
        results.append(run("_backward_Convolution", [out_grad, x, w], **params))
        (built,) = cache._programs.values()
        programs.append(built)
        caches.append(cache)
        if budget == "whole":
            whole_bytes = built.lent_bytes
    if whole_bytes == 0:  # nothing to chunk
        return
    chunked = programs[1]
    assert isinstance(chunked, program.SummedChunks) and 1 <= chunked.per_chunk < 5, chunked
    assert chunked.lent_bytes < whole_bytes
    # each result is a float32 sum in some order (the chunks change it): within the bound of such sums of the
    # float64 reference, and so within twice that of the whole batch's and of mxkit-cpu's results
    magnitudes = run("_backward_Convolution", [np.abs(out_grad), np.abs(x), np.abs(w)], "reference", **params)
    reference = run("_backward_Convolution", [out_grad, x, w], "reference", **params)
    expected = run("_backward_Convolution", [out_grad, x, w], which="cpu", **params)
    counts = [8 * 9, out_grad.size // 8, out_grad.size // 8]  # data: filters x window; weight, bias: N x positions
    for got, whole, want, cpu, size, count in zip(results[1], results[0], reference, expected, magnitudes, counts):
        assert_within(got, want, sum_bound(count, size), "chunked")
        assert_within(got, whole, 2 * sum_bound(count, size), "chunked vs whole")
        assert_within(got, cpu, 2 * sum_bound(count, size), "chunked vs mxkit-cpu")
    assert any("one sample" in refusal for refusal in caches[2].refusals)
    assert list(caches[2].chosen().values()) == ["fallback"]
    for got, want in zip(results[2], expected):
        np.testing.assert_array_equal(got, want)


def test_timing_the_candidates_of_an_in_place_call_computes_it_once(monkeypatch):
    """mxkit's planner lets Activation write over its input: the first call of a shape runs every candidate
    several times, each on the original input, so the result is sigmoid(x), not sigmoid(sigmoid(x))."""
    from mxkit.ndarray.registry import get_registry
    from mxkit_onednn import eltwise, program

    cache = program.ProgramCache()
    monkeypatch.setattr(eltwise, "PROGRAMS", cache)
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    expected = 1 / (1 + np.exp(-x.astype(np.float64)))
    op = get_registry().get("Activation")
    params = op.parse_params(dict(act_type="sigmoid"))
    op.kernel_for("numpy")(np, [x], [x], params)
    assert cache.builds == 1
    np.testing.assert_allclose(x, expected, rtol=1e-5)


def test_a_large_in_place_call_is_not_copied_to_time_its_candidates(monkeypatch):
    """Timing an in-place call's candidates copies its input: past IN_PLACE_TIMING_BYTES (VGG-16's first ReLU
    at batch 32 held 392 MB) nothing is copied and oneDNN's program serves, run once."""
    from mxkit.ndarray.registry import get_registry
    from mxkit_onednn import eltwise, program
    from mxkit_onednn.kernels import with_fallback

    cache = program.ProgramCache()
    monkeypatch.setattr(eltwise, "PROGRAMS", cache)
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    monkeypatch.setattr(program, "IN_PLACE_TIMING_BYTES", x.nbytes - 1)
    copies = []
    real_array = np.array
    monkeypatch.setattr(program.np, "array", lambda *a, **k: copies.append(1) or real_array(*a, **k))
    replaced_runs = []
    op = get_registry().get("Activation")
    kernel = op.kernel_for("numpy")
    expected = 1 / (1 + np.exp(-x.astype(np.float64)))
    params = op.parse_params(dict(act_type="sigmoid"))

    def counting(xp, inputs, outputs, params):
        replaced_runs.append(1)
        kernel.replaced(xp, inputs, outputs, params)

    served = with_fallback(eltwise.activation, counting, {})
    served(np, [x], [x], params)
    assert not copies and not replaced_runs
    (chosen,) = cache._programs.values()
    assert chosen is not program.FALLBACK
    np.testing.assert_allclose(x, expected, rtol=1e-5)


def _batchnorm_gradient_case():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    gamma = rng.standard_normal(3).astype(np.float32)
    return [g, x, gamma, np.zeros(3, np.float32), np.ones(3, np.float32)], dict(fix_gamma=False,
                                                                                 use_global_stats=False)


def _batchnorm_gradient_bound(inputs, cpu):
    """Each gradient of the two kernels within a few sums of the batch's terms of one another (see test_norm)."""
    g, x = inputs[:2]
    count = x.size // x.shape[1]
    magnitude = [np.abs(cpu[0]) + np.abs(g).max(), np.abs(g).sum(axis=(0, 2, 3)) * 4, np.abs(g).sum(axis=(0, 2, 3))]
    return [16 * (count + 2) * UNIT * m + 1e-6 for m in magnitude]


def test_a_batchnorm_gradient_needs_no_workspace_the_size_of_the_data(monkeypatch):
    """With batch statistics the gradient recomputes the forward, whose normalised output goes into the data
    gradient's buffer (then overwritten): under a budget smaller than the data oneDNN still serves
    (ResNet-50's first layers at batch 16 hold 51 MB and were left to mxkit-cpu)."""
    from mxkit_onednn import norm, program

    inputs, params = _batchnorm_gradient_case()
    cache = program.ProgramCache()
    cache.only = "plain"
    monkeypatch.setattr(program, "WORKSPACE_BYTES", inputs[1].nbytes - 1)
    monkeypatch.setattr(norm, "PROGRAMS", cache)
    grads = run("_backward_BatchNorm", inputs, **params)
    assert not cache.refusals and "fallback" not in cache.chosen().values()
    (built,) = cache._programs.values()
    assert built.lent_bytes < inputs[1].nbytes
    cpu = run("_backward_BatchNorm", inputs, "cpu", **params)
    for got, want, bound in zip(grads, cpu, _batchnorm_gradient_bound(inputs, cpu)):
        np.testing.assert_array_less(np.abs(got - want), bound)


def test_a_batchnorm_gradient_in_place_over_the_workspace_budget_goes_to_the_replaced_kernel(monkeypatch):
    """A data gradient written over out_grad (the planner may share them) cannot hold the recomputed forward:
    that goes into a workspace the size of the data, past the budget refused, and mxkit-cpu's kernel serves."""
    from mxkit_onednn import norm, program

    inputs, params = _batchnorm_gradient_case()
    want = run("_backward_BatchNorm", inputs, "cpu", **params)
    cache = program.ProgramCache()
    cache.only = "plain"
    monkeypatch.setattr(program, "WORKSPACE_BYTES", inputs[1].nbytes - 1)
    monkeypatch.setattr(norm, "PROGRAMS", cache)
    op = get_registry().get("_backward_BatchNorm")
    in_place = [inputs[0].copy(), *inputs[1:]]
    outputs = [in_place[0], np.full(3, np.nan, np.float32), np.full(3, np.nan, np.float32)]
    op.kernel_for("numpy")(np, in_place, outputs, op.parse_params(params))
    assert any("workspace" in refusal for refusal in cache.refusals)
    assert list(cache.chosen().values()) == ["fallback"]
    for got, expected in zip(outputs, want):
        np.testing.assert_array_equal(got, expected)

    cache.clear()  # with room for the workspace oneDNN serves the in-place call too
    monkeypatch.setattr(program, "WORKSPACE_BYTES", 32 << 20)
    in_place = [inputs[0].copy(), *inputs[1:]]
    outputs = [in_place[0], np.full(3, np.nan, np.float32), np.full(3, np.nan, np.float32)]
    op.kernel_for("numpy")(np, in_place, outputs, op.parse_params(params))
    assert "fallback" not in cache.chosen().values()
    for got, expected, bound in zip(outputs, want, _batchnorm_gradient_bound(inputs, want)):
        np.testing.assert_array_less(np.abs(got - expected), bound)


def test_the_scratchpads_are_lent_with_the_workspace_not_kept_by_each_primitive(monkeypatch):
    """A call borrows its workspace and, after it, the largest scratchpad of its steps; no primitive
    owns one (each kept its own: 15-45 MB for ResNet-18's backward convolutions, mostly idle)."""
    from mxkit_onednn import conv, program

    lent = []
    real_lend = program.WORKSPACES.lend

    def recording_lend(nbytes):
        lent.append(nbytes)
        return real_lend(nbytes)

    x = np.random.default_rng(0).standard_normal((2, 16, 9, 9)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((8, 16, 3, 3)).astype(np.float32)
    out_grad = np.random.default_rng(2).standard_normal((2, 8, 9, 9)).astype(np.float32)
    for name, inputs in (("Convolution", [x, w]), ("_backward_Convolution", [out_grad, x, w])):
        for layout in ("blocked", "plain"):
            cache = program.ProgramCache()
            cache.only = layout
            monkeypatch.setattr(conv, "PROGRAMS", cache)
            run(name, inputs, **PARAMS)
            (built,) = cache._programs.values()
            if built is program.FALLBACK:
                continue
            monkeypatch.setattr(program.WORKSPACES, "lend", recording_lend)
            lent.clear()
            run(name, inputs, **PARAMS)
            monkeypatch.setattr(program.WORKSPACES, "lend", real_lend)
            pads = [primitive.scratchpad_bytes for primitive, _ in built.steps]
            assert built.scratchpad_bytes == max(pads)
            assert lent == [built.workspace_bytes + built.scratchpad_bytes]
            assert not any(hasattr(primitive, "scratchpad") for primitive, _ in built.steps)
            for primitive, _ in built.steps:
                if primitive.scratchpad_bytes:  # a call without the scratchpad it needs is refused
                    with pytest.raises(ValueError, match="scratchpad"):
                        primitive.run([np.empty(size, np.uint8) for size in primitive.sizes])


def test_a_candidate_whose_scratchpad_passes_the_budget_is_refused(monkeypatch):
    from mxkit_onednn import program
    from mxkit_onednn.program import FALLBACK, Program, ProgramCache

    class HugeScratchpad(Program):
        @property
        def scratchpad_bytes(self):
            return program.WORKSPACE_BYTES + 1

        def run(self, inputs, outputs):
            raise AssertionError("a refused candidate must not run")

    served = []
    cache = ProgramCache()
    cache.run("k", {"huge": HugeScratchpad}, [], [], fallback=lambda i, o: served.append(1))
    assert cache._programs["k"] is FALLBACK and served and "scratchpad" in cache.refusals[-1]


def test_a_fallback_that_does_not_compete_serves_only_where_every_builder_is_refused():
    from mxkit_onednn.program import FALLBACK, Program, ProgramCache

    class Ran(Program):
        def run(self, inputs, outputs):
            served.append("program")

    def refused():
        raise RuntimeError("not here")

    served = []
    cache = ProgramCache()
    cache.run("a", {"one": Ran, "two": Ran}, [], [], fallback=lambda i, o: served.append("fallback"),
              fallback_competes=False)
    assert "fallback" not in served and cache._programs["a"] is not FALLBACK
    served.clear()
    cache.run("b", {"one": refused}, [], [], fallback=lambda i, o: served.append("fallback"), fallback_competes=False)
    assert served == ["fallback"] and cache._programs["b"] is FALLBACK


@pytest.mark.parametrize("winner", ["program", "fallback"])
def test_the_replaced_kernels_scratch_is_released_when_a_program_beats_it(monkeypatch, winner):
    """The replaced kernel runs on a shape's first call only to be timed: where a oneDNN program wins, its
    scratch buffers are released (they would stay beside the workspace that serves the shape); where it
    wins itself it keeps them, since it goes on serving."""
    from mxkit_onednn import program

    released = []
    monkeypatch.setattr(program, "release_replaced_scratch", lambda: released.append(True) or 0)
    built = program.Program()
    monkeypatch.setattr(program, "fastest", lambda candidates, inputs, outputs, fallback=None:
                        built if winner == "program" else program.FALLBACK)
    cache = program.ProgramCache()
    cache.run(("op", 1), {"blocked": lambda: built}, [], [], fallback=lambda ins, outs: None)
    assert released == ([True] if winner == "program" else [])
    cache.run(("op", 1), {"blocked": lambda: built}, [], [], fallback=lambda ins, outs: None)  # chosen: no timing
    assert len(released) == (1 if winner == "program" else 0)


def test_releasing_the_replaced_scratch_reaches_mxkit_cpu():
    pytest.importorskip("mxkit_cpu")
    from mxkit.core.context import cpu
    from mxkit.ndarray.backend import backend_of
    from mxkit_onednn import program

    backend = backend_of(cpu())
    x = np.random.default_rng(0).standard_normal((2, 16, 9, 9))  # float64: mxkit-cpu's kernel serves
    run("Convolution", [x, np.ones((8, 16, 3, 3))], **PARAMS)
    assert backend.memory_stats()["scratch"] > 0
    assert program.release_replaced_scratch() > 0
    assert backend.memory_stats()["scratch"] == 0


def test_workspace_slots_share_bytes_only_when_their_lives_do_not_meet():
    """pack_workspace: a slot lives from the first step naming it to the last; slots whose lives meet (one
    step reading one and writing the other included) keep apart, the others may take the same bytes."""
    from mxkit_onednn import program

    p = program.Program()
    a, b, c, d = p.slot(1000), p.slot(200), p.slot(1000), p.slot(64)
    p.add("reorder a", [("in", 0), a])      # step 0: a written
    p.add("reorder b", [("in", 1), b])      # step 1: b written
    p.add("use a b", [a, b, ("out", 0)])    # step 2: a and b read for the last time
    p.add("write c", [("in", 0), c])        # step 3: c written
    p.add("c to d", [c, d])                 # step 4: c read, d written: their lives meet
    p.add("d out", [d, ("out", 1)])         # step 5
    assert p.workspace_bytes == 2 * program.aligned(1000) + program.aligned(200) + program.aligned(64)
    program.pack_workspace(p)
    refs = {name: refs for name, refs in p.steps}
    a2, b2 = refs["use a b"][0], refs["use a b"][1]
    c2, d2 = refs["c to d"]
    assert refs["reorder a"][1] == a2 and refs["write c"][1] == c2 and refs["d out"][0] == d2

    def overlap(x, y):
        return x[1] < y[1] + program.aligned(y[2]) and y[1] < x[1] + program.aligned(x[2])

    assert not overlap(a2, b2) and not overlap(c2, d2)  # lives that meet keep apart
    assert a2[1] == c2[1]  # a is dead when c is written: the same bytes
    assert p.workspace_bytes == program.aligned(1000) + program.aligned(200)


def test_the_workspace_pool_keeps_nothing_larger_than_the_kept_programs_need():
    """After a first call's timing, WORKSPACES.fit(need of the kept programs): a buffer a losing candidate
    borrowed goes, the next call gets one of the size the kept programs need, and steady calls reuse it."""
    from mxkit_onednn import program

    pool = program.WorkspacePool()
    with pool.lend(10 << 20):  # a candidate that lost
        pass
    with pool.lend(1 << 20):
        pass
    assert pool.nbytes == 10 << 20
    pool.fit(1 << 20)
    assert pool.nbytes == 0
    with pool.lend(1 << 20) as first:
        pass
    with pool.lend(1 << 20) as again:
        assert again is first  # steady calls allocate nothing
    assert pool.nbytes == 1 << 20
