"""Programs: the oneDNN primitives of one operator call of one shape, built once and cached.

A program is a list of steps (layout reorders and the operator's primitive), each binding
its arguments to the call's inputs, its outputs or slots of a workspace. The workspace holds
the operands oneDNN wants in another layout than numpy's (blocked channels, reordered
filters); it is one buffer per thread, sized by the largest program that thread ran, so
layout copies cost no allocation per call and no memory per cached shape. Each primitive
keeps its own scratchpad (oneDNN's user-managed temporary space), allocated when the program
is built and reused by every call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: programs kept (the least recently used goes first); a network has a few dozen distinct shapes
MAX_PROGRAMS = 256

ALIGNMENT = 64

# a reference to an array of a call: ("in", i), ("out", i) or ("ws", offset, nbytes)
Ref = tuple


@dataclass
class Program:
    """The steps of one operator call of one shape."""

    steps: list[tuple[Any, list[Ref]]] = field(default_factory=list)
    workspace_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def slot(self, nbytes: int) -> Ref:
        """A new workspace slot of ``nbytes`` (64-byte aligned)."""
        offset = self.workspace_bytes
        self.workspace_bytes += -(-nbytes // ALIGNMENT) * ALIGNMENT
        return ("ws", offset, nbytes)

    def add(self, primitive: Any, refs: list[Ref]) -> None:
        self.steps.append((primitive, refs))

    @property
    def scratchpad_bytes(self) -> int:
        return sum(primitive.scratchpad_bytes for primitive, _ in self.steps)

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
        """Run every step on ``inputs`` and ``outputs`` (C-contiguous float32 arrays)."""
        workspace = thread_workspace(self.workspace_bytes)
        with self.lock:  # the primitives' scratchpads serve one call at a time
            for primitive, refs in self.steps:
                primitive.run([_resolve(ref, inputs, outputs, workspace) for ref in refs])


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

    def build(self) -> Program:
        for primitive, refs in self._after:
            self.program.add(primitive, refs)
        self._after = []
        return self.program


_local = threading.local()


def thread_workspace(nbytes: int) -> np.ndarray:
    """This thread's workspace, grown to at least ``nbytes`` (contents undefined; 64-byte aligned)."""
    buffer = getattr(_local, "workspace", None)
    if buffer is None or buffer.nbytes < nbytes:
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        offset = (-raw.ctypes.data) % ALIGNMENT
        buffer = _local.workspace = raw[offset:offset + nbytes]
    return buffer


def release_workspace() -> None:
    """Drop this thread's workspace (the next program allocates a new one)."""
    _local.workspace = None


class ProgramCache:
    """Programs by key (operator, shapes, parameters), least recently used first out; thread-safe."""

    def __init__(self, capacity: int = MAX_PROGRAMS) -> None:
        self.capacity = capacity
        self._programs: OrderedDict[Hashable, Program] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, key: Hashable, build: Callable[[], Program]) -> Program:
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
                return program
        program = build()  # outside the lock: building may take milliseconds
        with self._lock:
            self.builds += 1
            self._programs[key] = program
            while len(self._programs) > self.capacity:
                self._programs.popitem(last=False)
        return program

    def __len__(self) -> int:
        return len(self._programs)

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


#: the process's programs
PROGRAMS = ProgramCache()

__all__ = ["MAX_PROGRAMS", "PROGRAMS", "Builder", "Program", "ProgramCache", "release_workspace",
           "thread_workspace"]
