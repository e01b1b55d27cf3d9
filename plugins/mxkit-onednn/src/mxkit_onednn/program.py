"""Programs: the oneDNN primitives of one operator call of one shape, built once and cached.

A program is a list of steps (layout reorders and the operator's primitive), each binding
its arguments to the call's inputs, its outputs or slots of a workspace. The workspace holds
the operands oneDNN wants in another layout than numpy's (blocked channels, reordered
filters); programs borrow it from one process-wide pool of buffers (:data:`WORKSPACES`) for the
length of a call, so layout copies cost no allocation per call, no memory per cached shape
and no memory per thread: the pool holds as many buffers as calls ever ran at once, each the
size of the largest program. A program whose workspace would pass :data:`WORKSPACE_BYTES`
runs its batch in chunks of samples (:class:`Chunked`), or is not a candidate at all.
The primitives' scratchpads (oneDNN's user-managed temporary space) are lent the same way: the
workspace a call borrows ends with a region of the largest scratchpad of its steps, which run one
after the other. Each primitive owning its scratchpad kept 15-45 MB for the backward
convolutions of one ResNet-18 (batch 8), most of it idle at any moment.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError

#: programs kept (the least recently used goes first); a network has a few dozen distinct shapes
MAX_PROGRAMS = 256

ALIGNMENT = 64

#: the most workspace one program may borrow: activations reordered into oneDNN's blocked layout are
#: copies of whole arrays (at ResNet-50's batch 32, 155 MB per call beside a 300 MB memory plan), so a
#: program that needs more runs its batch in chunks that fit, and one that cannot be chunked is refused
WORKSPACE_BYTES = 32 << 20

def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of :data:`ALIGNMENT` (what a workspace slot of that size takes)."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


# a reference to an array of a call: ("in", i), ("out", i) or ("ws", offset, nbytes)
Ref = tuple


@dataclass
class Program:
    """The steps of one operator call of one shape."""

    steps: list[tuple[Any, list[Ref]]] = field(default_factory=list)
    workspace_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: :attr:`scratchpad_bytes` once worked out (None until then, and after a step is added): summing the
    #: steps' scratchpads on every call cost a small layer's call more than its arithmetic
    _scratchpad: int | None = field(default=None, repr=False, compare=False)

    def slot(self, nbytes: int) -> Ref:
        """A new workspace slot of ``nbytes`` (64-byte aligned)."""
        offset = self.workspace_bytes
        self.workspace_bytes += aligned(nbytes)
        return ("ws", offset, nbytes)

    def add(self, primitive: Any, refs: list[Ref]) -> None:
        self.steps.append((primitive, refs))
        self._scratchpad = None

    @property
    def scratchpad_bytes(self) -> int:
        """The scratchpad the steps need: the largest of theirs (they run one at a time)."""
        if self._scratchpad is None:
            self._scratchpad = max((primitive.scratchpad_bytes for primitive, _ in self.steps), default=0)
        return self._scratchpad

    @property
    def lent_bytes(self) -> int:
        """What a call borrows: the workspace and, after it, the scratchpad."""
        return self.workspace_bytes + self.scratchpad_bytes

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray], workspace: np.ndarray | None = None) -> None:
        """Run every step on ``inputs`` and ``outputs`` (C-contiguous float32 arrays), in ``workspace`` (64-byte
        aligned, at least :attr:`lent_bytes`) or, without one, in a buffer borrowed from :data:`WORKSPACES`."""
        workspace_bytes, pad = self.workspace_bytes, self.scratchpad_bytes
        if workspace is None:
            if workspace_bytes + pad:
                with WORKSPACES.lend(workspace_bytes + pad) as lent:
                    self.run(inputs, outputs, lent)
                return
            workspace = _NO_WORKSPACE  # nothing to borrow: skip the pool's lock (a small layer's call is microseconds)
        # slots are 64-byte aligned, so the scratchpad after them is too
        with self.lock:  # a primitive runs one call at a time
            scratchpad = workspace[workspace_bytes:workspace_bytes + pad] if pad else None
            run_steps = _compiled["run_steps"]
            if run_steps is not None:
                run_steps(self.steps, inputs, outputs, workspace, scratchpad, _resolve)
                return
            for primitive, refs in self.steps:
                primitive.run([_resolve(ref, inputs, outputs, workspace) for ref in refs], scratchpad)


#: the extension's ``run_steps`` once a :class:`Builder` has loaded it (its loop binds each primitive's memory in
#: C); None until then
_compiled: dict[str, Any] = {"run_steps": None}


#: the workspace of a program that needs none
_NO_WORKSPACE = np.empty(0, np.uint8)


class _ChunkPrograms:
    """What a call split into chunks needs of workspace and scratchpad: the most any of its
    chunk programs (``programs``) needs."""

    programs: dict

    @property
    def workspace_bytes(self) -> int:
        return max(program.workspace_bytes for program in self.programs.values())

    @property
    def scratchpad_bytes(self) -> int:
        return max(program.scratchpad_bytes for program in self.programs.values())

    @property
    def lent_bytes(self) -> int:
        return max(program.lent_bytes for program in self.programs.values())


class Chunked(_ChunkPrograms):
    """One operator call over a batch as calls over consecutive chunks of its samples, each by a
    :class:`Program` built for the chunk's size (the workspace of a chunk fits :data:`WORKSPACE_BYTES`).

    ``batched`` lists the inputs whose first axis is the batch (the others, weights, are passed whole);
    every output's first axis is the batch. Slices of C-contiguous arrays along the first axis are
    C-contiguous, as the primitives need."""

    def __init__(self, build: Callable[[int], Program], batch: int, per_chunk: int, batched: tuple[int, ...]) -> None:
        self.batch, self.per_chunk, self.batched = batch, per_chunk, batched
        self.programs = {size: build(size) for size in {min(per_chunk, batch - start)
                                                         for start in range(0, batch, per_chunk)}}
        self.steps = self.programs[min(per_chunk, batch)].steps

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray], workspace: np.ndarray | None = None) -> None:
        for start in range(0, self.batch, self.per_chunk):
            stop = min(start + self.per_chunk, self.batch)
            self.programs[stop - start].run(
                [array[start:stop] if index in self.batched else array for index, array in enumerate(inputs)],
                [array[start:stop] for array in outputs], workspace)


class Prepared(_ChunkPrograms):
    """A :class:`Chunked` call whose chunks share an input that oneDNN wants in another layout (a convolution's
    filters): ``prologue`` reorders input ``index`` once per call into a buffer lent for the call, and every
    chunk program reads that buffer, where each would otherwise reorder the same filters again (VGG-16's
    prediction at batch 32 reordered each layer's filters once per chunk of one to five samples)."""

    def __init__(self, prologue: Program, chunked: Chunked, index: int) -> None:
        self.prologue, self.chunked, self.index = prologue, chunked, index
        self.programs = chunked.programs
        self.steps = [*prologue.steps, *chunked.steps]
        self.prepared_bytes = aligned(prologue.steps[0][0].sizes[1])

    @property
    def lent_bytes(self) -> int:
        return self.prepared_bytes + max(self.prologue.lent_bytes, super().lent_bytes)

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
        # one buffer: the prepared input, then the workspace every step uses in turn
        with WORKSPACES.lend(self.lent_bytes) as lent:
            prepared, workspace = lent[:self.prepared_bytes], lent[self.prepared_bytes:]
            self.prologue.run([inputs[self.index]], [prepared], workspace)
            self.chunked.run([prepared if position == self.index else array for position, array in enumerate(inputs)],
                             outputs, workspace)


def within_workspace(build: Callable[[int], Program], batch: int, batched: tuple[int, ...],
                     budget: int | None = None) -> Program | Chunked:
    """The program of ``build(batch)``, or, when its workspace and scratchpad would pass ``budget``
    (:data:`WORKSPACE_BYTES`), a :class:`Chunked` one whose chunks fit (one sample at least)."""
    budget = WORKSPACE_BYTES if budget is None else budget
    one = build(1)
    if one.lent_bytes * batch <= budget or batch == 1:
        whole = one if batch == 1 else build(batch)
        if whole.lent_bytes <= budget or batch == 1:
            return whole
    per_chunk = max(1, budget // max(one.lent_bytes, 1))
    return Chunked(lambda size: one if size == 1 else build(size), batch, per_chunk, batched)


class SummedChunks(_ChunkPrograms):
    """A gradient over a batch as calls over consecutive chunks of its samples, for programs whose outputs
    are partly per sample (a data gradient: written chunk by chunk) and partly sums over the samples (weight
    and bias gradients: the first chunk writes them, each later chunk's program adds its part to them).

    ``build(size, accumulate)`` makes the program of a chunk of ``size`` samples; with ``accumulate`` it adds
    its sums to the outputs instead of writing them. ``batched`` lists the inputs whose first axis is the
    batch, ``batched_outputs`` the outputs."""

    def __init__(self, build: Callable[[int, bool], Program], batch: int, per_chunk: int, batched: tuple[int, ...],
                 batched_outputs: tuple[int, ...]) -> None:
        self.batch, self.per_chunk, self.batched, self.batched_outputs = batch, per_chunk, batched, batched_outputs
        self.chunks = [(start, min(start + per_chunk, batch)) for start in range(0, batch, per_chunk)]
        self.programs = {(stop - start, start > 0): None for start, stop in self.chunks}
        for size, accumulate in self.programs:
            self.programs[(size, accumulate)] = build(size, accumulate)
        self.steps = self.programs[(self.chunks[0][1], False)].steps

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
        for start, stop in self.chunks:
            self.programs[(stop - start, start > 0)].run(
                [array[start:stop] if index in self.batched else array for index, array in enumerate(inputs)],
                [array[start:stop] if index in self.batched_outputs else array for index, array in enumerate(outputs)])


def within_workspace_summed(build: Callable[[int, bool], Program], batch: int, batched: tuple[int, ...],
                            batched_outputs: tuple[int, ...], budget: int | None = None) -> Program | SummedChunks:
    """The program of ``build(batch, False)``, or, when its workspace and scratchpad would pass ``budget``
    (:data:`WORKSPACE_BYTES`), :class:`SummedChunks` whose chunks fit; a refused candidate
    (:class:`RuntimeError`) when one sample does not fit."""
    budget = WORKSPACE_BYTES if budget is None else budget
    whole = build(batch, False)
    if whole.lent_bytes <= budget:
        return whole
    one = build(1, True)
    if one.lent_bytes > budget or batch == 1:
        raise RuntimeError(f"needs {one.lent_bytes} bytes of workspace and scratchpad for one sample, more than the "
                           f"{budget} allowed (WORKSPACE_BYTES)")
    # what a sample adds (the activations' copies, the columns) and what every chunk needs (the sums' copies)
    per_sample = max(build(2, True).lent_bytes - one.lent_bytes, 1)
    per_chunk = max(1, min(batch - 1, (budget - (one.lent_bytes - per_sample)) // per_sample))
    while per_chunk > 1 and build(per_chunk, True).lent_bytes > budget:
        per_chunk = per_chunk * 3 // 4
    return SummedChunks(build, batch, per_chunk, batched, batched_outputs)


def refuse_over_workspace(program: Program) -> Program:
    """``program``, or a :class:`RuntimeError` (a refused candidate) when its workspace and scratchpad
    pass :data:`WORKSPACE_BYTES`: for programs that cannot run in chunks (a weight gradient sums over
    the batch)."""
    if program.lent_bytes > WORKSPACE_BYTES:
        raise RuntimeError(f"needs {program.lent_bytes} bytes of workspace and scratchpad, more than the "
                           f"{WORKSPACE_BYTES} allowed (WORKSPACE_BYTES)")
    return program


def _refuse_over_scratchpad(program: Any) -> Any:
    """``program``, or a refused candidate when its scratchpad alone passes :data:`WORKSPACE_BYTES`
    (a :class:`Chunked` one's chunks were sized with it), whatever builder made it: a gemm-based
    convolution's scratchpad holds the whole batch's columns (70 MB for one of ResNet-18's at batch 8),
    which the shared workspace would then keep."""
    if isinstance(program, Program) and program.scratchpad_bytes > WORKSPACE_BYTES:  # chunks were sized for it
        raise RuntimeError(f"needs {program.scratchpad_bytes} bytes of scratchpad, more than the "
                           f"{WORKSPACE_BYTES} allowed (WORKSPACE_BYTES)")
    return program


def release_replaced_scratch() -> int:
    """Drop the scratch buffers the replaced kernels keep between calls and are not using now; the bytes.

    A shape's first call times the replaced kernel (mxkit-cpu's) beside oneDNN's programs; where a program
    wins, the replaced kernel ran only to be timed, and its scratch (column matrices of up to 16 MB per
    name and thread) would stay for the life of the process beside this plugin's workspace, which then
    serves the shape: 58 MB on ResNet-50 prediction at batch 32, 86 MB on its training at batch 16. Shapes
    the replaced kernel still serves get theirs again on their next call."""
    from mxkit_onednn._mxkit import release_scratch
    from mxkit_onednn.kernels import BACKEND

    return release_scratch(BACKEND)


def _resolve(ref: Ref, inputs: list, outputs: list, workspace: np.ndarray) -> np.ndarray:
    if ref[0] == "in":
        return inputs[ref[1]]
    if ref[0] == "out":
        return outputs[ref[1]]
    return workspace[ref[1]:ref[1] + ref[2]]


class Builder:
    """Assembles a :class:`Program`: operands in the layouts a primitive chose, reorders where needed."""

    def __init__(self, dnnl: Any) -> None:
        self.dnnl = dnnl
        _compiled["run_steps"] = getattr(dnnl, "run_steps", None)
        self.program = Program()
        self._after: list[tuple[Any, list[Ref]]] = []

    def operand(self, ref: Ref, plain: Any, chosen: Any) -> Ref:
        """``ref`` (an array in numpy's layout ``plain``) in layout ``chosen``: itself, or a reordered copy."""
        if chosen is None or chosen.same_as(plain):
            return ref
        target = self.program.slot(chosen.nbytes)
        reorder = self.dnnl.Primitive(self.dnnl.reorder_pd(plain, chosen),
                                      [(self.dnnl.ARG_SRC, plain), (self.dnnl.ARG_DST, chosen)])
        self.program.add(reorder, [ref, target])
        return target

    def result(self, ref: Ref, plain: Any, chosen: Any) -> Ref:
        """Where a primitive writes ``ref`` (an output in numpy's layout ``plain``) in layout ``chosen``;
        the reorder into ``ref`` runs after the operator's steps."""
        if chosen is None or chosen.same_as(plain):
            return ref
        source = self.program.slot(chosen.nbytes)
        reorder = self.dnnl.Primitive(self.dnnl.reorder_pd(chosen, plain),
                                      [(self.dnnl.ARG_SRC, chosen), (self.dnnl.ARG_DST, plain)])
        self._after.append((reorder, [source, ref]))
        return source

    def scratch(self, md: Any) -> Ref:
        """A workspace slot for an intermediate of layout ``md``."""
        return self.program.slot(md.nbytes)

    def step(self, pd: Any, bindings: list[tuple[int, Any, Ref]]) -> None:
        """Run the primitive of ``pd`` with ``(arg, md, ref)`` bindings."""
        primitive = self.dnnl.Primitive(pd, [(arg, md) for arg, md, _ in bindings])
        self.program.add(primitive, [ref for _, _, ref in bindings])

    def build(self, pack: bool = True) -> Program:
        """The program, its workspace packed (:func:`pack_workspace`). A caller that adds steps after this
        passes ``pack=False`` and packs once they are all there: packing reads each slot's life from the steps."""
        for primitive, refs in self._after:
            self.program.add(primitive, refs)
        self._after = []
        if pack:
            pack_workspace(self.program)
        return self.program


def pack_workspace(program: Program) -> None:
    """Let workspace slots whose uses do not overlap share bytes, and shrink the workspace to what that needs
    (once per program, when all its steps are there).

    A slot lives from the first step that names it to the last (a step that reads one slot and writes
    another keeps them apart). Slots are placed largest first, each at the lowest offset clear of every
    placed slot whose life meets its own. A backward convolution's filters in oneDNN's layout (read by the
    data gradient) and its filter gradient in that layout (written after it) then take the same bytes:
    19.7 MB of workspace became 10.2 MB for ResNet-18's 512-channel 3x3 layers at batch 8."""
    lives: dict[int, list[int]] = {}  # slot offset -> [first step, last step, bytes]
    for index, (_, refs) in enumerate(program.steps):
        for ref in refs:
            if ref[0] == "ws":
                life = lives.setdefault(ref[1], [index, index, 0])
                life[1] = index
                life[2] = max(life[2], aligned(ref[2]))
    placed: list[tuple[int, int, int, int]] = []  # (offset, bytes, first step, last step)
    moved: dict[int, int] = {}
    for old, (first, last, size) in sorted(lives.items(), key=lambda item: (-item[1][2], item[0])):
        offset = 0
        for start, end in sorted((o, o + n) for o, n, f, la in placed if f <= last and first <= la):
            if offset + size <= start:
                break
            offset = max(offset, end)
        placed.append((offset, size, first, last))
        moved[old] = offset
    program.steps = [(primitive, [("ws", moved[ref[1]], ref[2]) if ref[0] == "ws" else ref for ref in refs])
                     for primitive, refs in program.steps]
    program.workspace_bytes = max((offset + size for offset, size, _, _ in placed), default=0)


#: timing runs of each candidate program on a shape's first call (the best of them counts)
TRIALS = 2

#: untimed runs of each candidate before its timed ones: a primitive's first runs pay for what it sets up
#: once (oneDNN's brgemm matmul took 250-500 us in its first two runs on an MLP's 128x784 layer, against
#: 140-160 after, while the inner product's gemm took 180-215 then 165), and candidates timed cold were
#: chosen by which one warmed up faster
WARMUP_RUNS = 1

#: a candidate replaces an earlier one (the replaced kernel first, then the builders in order) only when it
#: takes at most this fraction of its time: on a loaded machine two timings of one kernel differ by tens
#: of percent, and a coin toss between near-equal candidates is not worth the memory of the loser's habits
MARGIN = 0.8


#: in-place calls whose inputs hold more than this are not timed (timing needs a copy of those inputs)
IN_PLACE_TIMING_BYTES = 4 << 20


#: the candidate that stands for the replaced kernel
FALLBACK = "fallback"


def _run(program: Any, inputs: list, outputs: list, fallback: Callable[[list, list], None] | None) -> None:
    if program is FALLBACK:
        fallback(inputs, outputs)
    else:
        program.run(inputs, outputs)


def cost(wall: float, cpu: float) -> float:
    """What one timing run of a candidate counts for: the lesser of its wall-clock seconds and the CPU seconds
    the process spent meanwhile (all its threads).

    On an idle machine a candidate running on several cores takes less wall time than CPU time, and the wall
    time is what a user waits. On a loaded one (more runnable threads than cores) the wall time is mostly the
    scheduler's: measured on two shared cores, one convolution's wall time was 1 to 10 times its CPU time from
    run to run, and choices made by it kept mxkit-cpu's kernel for convolutions where oneDNN's program does a
    third to a seventh of the work (Inception-v3's 1x1 convolutions of 2048 channels). The CPU time is then
    the cost that does not depend on the other load; taking the lesser of the two serves both cases."""
    return min(wall, cpu)


def fastest(programs: list[Any], inputs: list, outputs: list,
            fallback: Callable[[list, list], None] | None = None) -> Any:
    """The candidate (a :class:`Program` or :data:`FALLBACK`) that ran fastest on these arrays, each
    :data:`TRIALS` times, the best time (:func:`cost`) counting, a later one winning only by :data:`MARGIN`; the
    outputs hold the chosen candidate's result (candidates round differently).

    An operator computed in place (an output sharing memory with an input: mxkit's planner lets
    ``Activation`` and the activation gradients overwrite their input) would read its own result on
    the second run; those inputs are copied once and put back before every run after the first, unless they
    hold more than :data:`IN_PLACE_TIMING_BYTES`: then the first oneDNN candidate serves without timing."""
    if len(programs) == 1:
        _run(programs[0], inputs, outputs, fallback)
        return programs[0]
    in_place = [index for index, array in enumerate(inputs)
                if any(np.may_share_memory(array, output) for output in outputs)]
    if sum(inputs[index].nbytes for index in in_place) > IN_PLACE_TIMING_BYTES:
        # the copies would raise the first batch's peak (VGG-16's first ReLU at batch 32: 392 MB beside a
        # 2 GB process; Inception-v3's prediction peaked 29 MB higher in its first batch than in the later
        # ones): the first oneDNN candidate serves untimed (the in-place kernels are elementwise, where on
        # arrays this large oneDNN's vectorised loop is no slower than the replaced one's)
        chosen = next((program for program in programs if program is not FALLBACK), programs[0])
        _run(chosen, inputs, outputs, fallback)
        return chosen
    saved = {index: np.array(inputs[index], copy=True) for index in in_place}

    def run_fresh(program: Any) -> None:
        for index, copy in saved.items():
            np.copyto(inputs[index], copy)
        _run(program, inputs, outputs, fallback)

    for _ in range(WARMUP_RUNS):
        for program in programs:
            run_fresh(program)
    best = [float("inf")] * len(programs)
    for _ in range(TRIALS):
        for index, program in enumerate(programs):
            for position, copy in saved.items():
                np.copyto(inputs[position], copy)
            wall, cpu = time.perf_counter(), time.process_time()
            _run(program, inputs, outputs, fallback)
            best[index] = min(best[index], cost(time.perf_counter() - wall, time.process_time() - cpu))
    chosen = 0
    for index in range(1, len(programs)):
        if best[index] <= MARGIN * best[chosen]:
            chosen = index
    if chosen != len(programs) - 1:  # the result of the program that will serve: a rerun gives the same bits
        run_fresh(programs[chosen])
    return programs[chosen]


class WorkspacePool:
    """Workspace buffers lent to programs for the length of a call (64-byte aligned, contents undefined).

    A call borrows the smallest free buffer that fits, or, when none does, replaces the largest free
    one with a new buffer the size of the largest call so far: the pool keeps as many buffers as calls
    ran at once, none larger than the largest program's workspace, and once it holds that many every
    free buffer fits every call, so steady-state steps allocate nothing (new buffers the size of the
    call alone kept being replaced whenever two calls overlapped in another order: 28 MB allocated in a
    ResNet-50 training step). A chain of operators (one call at a time) keeps one."""

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lent = 0
        self._largest = 0
        self._lock = threading.Lock()

    def borrow(self, nbytes: int) -> np.ndarray:
        with self._lock:
            self._largest = max(self._largest, nbytes)
            size = self._largest
            fitting = [i for i, free in enumerate(self._free) if free.nbytes >= nbytes]
            buffer = None
            if fitting:
                buffer = self._free.pop(min(fitting, key=lambda i: self._free[i].nbytes))
            elif self._free:  # too small for this call: its memory goes, a larger buffer comes
                self._free.pop(max(range(len(self._free)), key=lambda i: self._free[i].nbytes))
            self._lent += 1
        if buffer is None:
            raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
            offset = (-raw.ctypes.data) % ALIGNMENT
            buffer = raw[offset:offset + size]
        return buffer

    def give_back(self, buffer: np.ndarray) -> None:
        with self._lock:
            self._lent -= 1
            self._free.append(buffer)

    @contextmanager
    def lend(self, nbytes: int) -> Iterator[np.ndarray]:
        """A buffer of at least ``nbytes`` for the ``with`` block."""
        buffer = self.borrow(nbytes)
        try:
            yield buffer
        finally:
            self.give_back(buffer)

    @property
    def nbytes(self) -> int:
        """The bytes of the buffers not lent now."""
        with self._lock:
            return sum(buffer.nbytes for buffer in self._free)

    def fit(self, nbytes: int) -> None:
        """Make ``nbytes`` the largest call (the programs kept need no more): free buffers larger than that go,
        so that a candidate program timed on a first call and not kept leaves none of its workspace behind."""
        with self._lock:
            self._largest = nbytes
            self._free = [buffer for buffer in self._free if buffer.nbytes <= nbytes]

    def clear(self) -> None:
        """Drop the free buffers (the next calls allocate new ones, the size of the calls from then on)."""
        with self._lock:
            self._free.clear()
            self._largest = 0


#: the process's workspace buffers
WORKSPACES = WorkspacePool()


class ProgramCache:
    """Programs by key (operator, shapes, parameters), least recently used first out; thread-safe."""

    def __init__(self, capacity: int = MAX_PROGRAMS) -> None:
        self.capacity = capacity
        self._programs: OrderedDict[Hashable, Program] = OrderedDict()
        self._lock = threading.Lock()
        # re-entrant: a replaced kernel timed as a candidate may itself run a oneDNN kernel meeting a new key
        # (``_FusedConvolution``'s is the convolution's kernel followed by the addition and the relu)
        self._build_lock = threading.RLock()
        self.builds = 0
        self.refusals: list[str] = []
        #: the name of the one builder to use, or None: time them all and the replaced kernel
        self.only: str | None = None

    def run(self, key: Hashable, builders: dict[str, Callable[[], Program]], inputs: list, outputs: list,
            fallback: Callable[[list, list], None] | None = None, fallback_competes: bool = True) -> None:
        """Run the program of ``key`` on the arrays.

        The first call of a key builds one program per builder (ways to compute the same result),
        runs each and the ``fallback`` (the kernel this plugin replaced), and keeps the fastest,
        a oneDNN program only where it wins by :data:`MARGIN`: elsewhere the replaced kernel goes
        on serving that shape. A builder that oneDNN refuses (an unsupported case) is left out.
        With :attr:`only` set to a builder's name,
        that builder alone serves (tests check each way of computing on its own). With ``fallback_competes``
        false the replaced kernel is not timed, only used where every builder is refused (a fused operator's
        replaced kernel runs the unfused operations, each a oneDNN kernel timing its own candidates).
        """
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
        if program is None:
            # one first call at a time: two threads meeting a new key at once (two layers of one shape)
            # must not each choose by their own timings, or equal inputs could give different bits
            with self._build_lock:
                with self._lock:
                    program = self._programs.get(key)
                if program is None:
                    self._choose(key, builders, inputs, outputs, fallback, fallback_competes)
                    return  # the timing runs wrote the outputs
        _run(program, inputs, outputs, fallback)

    def _choose(self, key: Hashable, builders: dict[str, Callable[[], Program]], inputs: list, outputs: list,
                fallback: Callable[[list, list], None] | None, fallback_competes: bool = True) -> None:
        """Build the candidates of ``key``, time them on the arrays and keep the fastest."""
        # the replaced kernel first: a oneDNN program replaces it only where it wins by MARGIN
        candidates: list[Any] = [FALLBACK] if fallback is not None and self.only is None and fallback_competes \
            else []
        for name, build in builders.items():
            if self.only is not None and name != self.only:
                continue
            try:
                candidates.append(_refuse_over_scratchpad(build()))
            except RuntimeError as exc:  # DnnlError: this way is not supported here
                if isinstance(exc, MXKitError):  # also a RuntimeError, as MXNet's errors are: a real failure
                    raise
                self.refusals.append(f"{key[0]}: {exc}")
        if fallback is not None and not candidates:  # every builder refused
            candidates.append(FALLBACK)
        program = fastest(candidates, inputs, outputs, fallback)
        if FALLBACK in candidates and program is not FALLBACK:
            release_replaced_scratch()
        with self._lock:
            self.builds += 1
            self._programs[key] = program
            while len(self._programs) > self.capacity:
                self._programs.popitem(last=False)
            needed = max((kept.lent_bytes for kept in self._programs.values() if kept is not FALLBACK), default=0)
        # the candidates just timed borrowed workspace for themselves; only what the kept programs need stays
        WORKSPACES.fit(needed)

    def serving(self, key: Hashable) -> Any:
        """What serves ``key`` (as :meth:`program`), counted as a use: a caller that runs it itself keeps it
        as recently used as a call through :meth:`run` would."""
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
            return program

    def program(self, key: Hashable) -> Any:
        """What serves ``key``: its :class:`Program` (or :class:`Chunked`), :data:`FALLBACK`, or None (no call yet)."""
        with self._lock:
            return self._programs.get(key)

    def chosen(self) -> dict[Hashable, str]:
        """Per key, what serves it: ``"fallback"`` or the implementations of the program's primitives."""
        with self._lock:
            items = list(self._programs.items())
        return {key: "fallback" if program is FALLBACK else
                " + ".join(primitive.descriptor.implementation for primitive, _ in program.steps)
                for key, program in items}

    def __len__(self) -> int:
        return len(self._programs)

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


#: the process's programs
PROGRAMS = ProgramCache()

class BoundCall:
    """A kernel call worked out from its arguments: the program cache's key and builders, the views
    oneDNN reads and writes, the replaced kernel, and what copies results back into outputs that are
    not C-contiguous. Called once (:meth:`once`), it runs through its program cache as any call does;
    kept as a bound kernel (``kernel.bind``, for calls on these same arrays again and again), it looks
    up what serves its key after its first call and then runs that directly."""

    __slots__ = ("builders", "cache", "fallback", "finish", "inputs", "key", "outputs", "served")

    def __init__(self, cache: ProgramCache, key: Hashable, builders: dict[str, Callable[[], Program]], inputs: list,
                 outputs: list, fallback: Callable[[list, list], None] | None,
                 finish: Callable[[], None] | None = None) -> None:
        self.cache = cache
        self.key = key
        self.builders = builders
        self.inputs = inputs
        self.outputs = outputs
        self.fallback = fallback
        self.finish = finish
        self.served: Any = None

    def once(self) -> None:
        """Run through the program cache (choosing what serves the key on its first call)."""
        self.cache.run(self.key, self.builders, self.inputs, self.outputs, self.fallback)
        if self.finish is not None:
            self.finish()

    def __call__(self) -> None:
        served = self.served
        if served is None:
            self.once()
            self.served = self.cache.program(self.key)
            return
        _run(served, self.inputs, self.outputs, self.fallback)
        if self.finish is not None:
            self.finish()


__all__ = ["FALLBACK", "IN_PLACE_TIMING_BYTES", "MARGIN", "MAX_PROGRAMS", "PROGRAMS", "TRIALS", "WARMUP_RUNS",
           "WORKSPACES", "WORKSPACE_BYTES", "BoundCall", "Builder", "Chunked", "Prepared", "Program", "ProgramCache",
           "SummedChunks", "WorkspacePool", "aligned", "cost", "fastest", "refuse_over_workspace",
           "release_replaced_scratch", "within_workspace", "within_workspace_summed"]
