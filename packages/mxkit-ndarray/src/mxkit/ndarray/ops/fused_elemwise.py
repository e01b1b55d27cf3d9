"""``_FusedElemwise``: one node computing a whole elementwise expression.

The graph pass ``fuse`` (in mxkit-symbol) replaces chains of elementwise operators by
one such node; its parameter ``expression`` is the JSON program described in
:mod:`mxkit.ndarray.ops._fused_program`. The generic kernel runs it

- through numexpr (one multi-threaded pass over memory that releases the GIL) when the
  array module is numpy, numexpr is importable, every primitive has a numexpr form and
  config ``fused_numexpr`` allows it: ``always``; ``never``; or ``auto`` (the default),
  which keeps numexpr for what it does faster than the ufunc sequence: arithmetic
  programs (no exp/log/tanh..., whose SIMD numpy loops beat numexpr's per-element libm
  calls) over inputs of the output's shape (numexpr's broadcasting is slow) with at
  least :data:`NUMEXPR_MIN_ELEMENTS` elements (below that its per-call cost dominates),
  on machines with at least :data:`NUMEXPR_MIN_CORES` cores (its gain is its threads:
  measured on two cores, the ufunc sequence was faster in every case);
- otherwise as a sequence of ``xp`` ufunc calls writing into the output array with
  ``out=``: values live in registers (the output array first, then scratch arrays shaped
  like it, kept per thread) assigned by liveness, so a chain needs no scratch at all.

The config value is read once, at the first fused kernel call; :func:`use_numexpr`
changes it at run time.

A backend compiles the same program its own way (the CUDA plugin into one
``cupy.ElementwiseKernel`` with :func:`render_c_body`) by registering a kernel for
``_FusedElemwise``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from mxkit.ndarray.ops._fused_program import (
    PRIMITIVES,
    FusedProgramError,
    Program,
    numexpr_supported,
    parse_program,
    render_numexpr,
)
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import broadcast_shape

NUMEXPR_MODES = ("auto", "always", "never")
NUMEXPR_MIN_ELEMENTS = 1 << 16
NUMEXPR_MIN_CORES = 4
# primitives numexpr computes in its vectorised virtual machine; the others call libm per element
NUMEXPR_FAST = frozenset({"add", "sub", "mul", "div", "maximum", "minimum", "equal", "not_equal", "greater",
                          "greater_equal", "lesser", "lesser_equal", "logical_and", "logical_or", "logical_xor",
                          "negative", "abs", "sign", "copy", "where", "clip", "sqrt", "floor", "ceil", "trunc"})
_mode: str | None = None   # None: not read from config yet
_scratch = threading.local()


def _numexpr_mode() -> str:
    global _mode
    if _mode is None:
        from mxkit.core import config

        _mode = config.get("fused_numexpr")
    return _mode


@contextmanager
def use_numexpr(mode: bool | str) -> Iterator[None]:
    """Set when fused nodes use numexpr inside the block (process-wide).

    Parameters
    ----------
    mode : bool or {"auto", "always", "never"}
        ``True`` is ``"always"``, ``False`` ``"never"``.
    """
    global _mode
    if isinstance(mode, bool):
        mode = "always" if mode else "never"
    if mode not in NUMEXPR_MODES:
        raise FusedProgramError(f"use_numexpr: mode {mode!r} is not one of {', '.join(NUMEXPR_MODES)}")
    previous = _numexpr_mode()
    _mode = mode
    try:
        yield
    finally:
        _mode = previous


@lru_cache(maxsize=1)
def _numexpr_module() -> Any:
    try:
        import numexpr
    except ImportError:
        return None
    return numexpr


@lru_cache(maxsize=1)
def _core_count() -> int:
    numexpr = _numexpr_module()
    return numexpr.detect_number_of_cores() if numexpr is not None else 1


def _numexpr_pays(arithmetic: bool, inputs: list, out: Any) -> bool:
    """config ``fused_numexpr="auto"``: whether numexpr should beat the ufunc sequence here."""
    return (arithmetic and out.size >= NUMEXPR_MIN_ELEMENTS and _core_count() >= NUMEXPR_MIN_CORES
            and all(a.shape == out.shape for a in inputs))


def numexpr_available() -> bool:
    """Whether fused nodes can run through numexpr here (installed and not turned off)."""
    return _numexpr_mode() != "never" and _numexpr_module() is not None


# ---- the xp path: register allocation --------------------------------------------------------

class _XpPlan:
    """The program as ufunc calls over registers (register 0 is the output array)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.calls: list[tuple[str, int, tuple]] = []   # (primitive, destination register, operands)
        last_use = {}
        for position, step in enumerate(program.steps):
            for operand in step[1:]:
                if isinstance(operand, str) and operand[0] == "v":
                    last_use[int(operand[1:])] = position
        final = len(program.steps) - 1
        holder: dict[int, int] = {}      # step -> register holding its value
        busy: set[int] = set()
        registers = 1

        def dying_registers(operands: tuple, position: int) -> list[int]:
            return sorted({holder[int(o[1:])] for o in operands
                           if isinstance(o, str) and o[0] == "v" and last_use[int(o[1:])] == position})

        def lowest_free() -> int:
            return next(r for r in range(registers + 1) if r not in busy)

        for position, step in enumerate(program.steps):
            primitive, operands = step[0], step[1:]
            dying = dying_registers(operands, position)
            # where() writes one branch into its destination, then the other where the mask says:
            # it may reuse the register of x (keeping x, filling in y) or of y, never of the condition
            reusable = dying
            if primitive == "where":
                from_x, from_y = dying_registers(operands[1:2], position), dying_registers(operands[2:], position)
                reusable = from_y or from_x
            copy_to_output = False
            if position == final:
                destination = 0 if (0 not in busy or 0 in reusable) else lowest_free()
                copy_to_output = destination != 0
            else:
                destination = reusable[0] if reusable else lowest_free()
            if primitive == "where" and destination in from_x and destination not in from_y:
                primitive = "where_into_x"
            registers = max(registers, destination + 1)
            resolved = tuple(("const", o) if isinstance(o, float) else
                             ("input", int(o[1:])) if o[0] == "x" else ("reg", holder[int(o[1:])]) for o in operands)
            self.calls.append((primitive, destination, resolved))
            busy.difference_update(dying)
            busy.add(destination)
            holder[position] = destination
            if copy_to_output:
                self.calls.append(("copy", 0, (("reg", destination),)))
        self.registers = registers

    def run(self, xp: Any, inputs: list, out: Any) -> None:
        dtype = out.dtype
        registers = [out] + [_scratch_array(xp, i, out.shape, dtype) for i in range(1, self.registers)]
        for primitive, destination, operands in self.calls:
            args = [dtype.type(v) if kind == "const" else inputs[v] if kind == "input" else registers[v]
                    for kind, v in operands]
            target = registers[destination]
            if primitive == "copy":
                if args[0] is not target:
                    xp.copyto(target, args[0], casting="unsafe")
            elif primitive == "where":
                mask = xp.not_equal(args[0], 0)
                if args[2] is not target:
                    xp.copyto(target, args[2], casting="unsafe")
                xp.copyto(target, args[1], where=mask, casting="unsafe")
            elif primitive == "where_into_x":  # target holds x already
                xp.copyto(target, args[2], where=xp.equal(args[0], 0), casting="unsafe")
            elif primitive == "clip":
                xp.clip(args[0], args[1], args[2], out=target)
            else:
                getattr(xp, PRIMITIVES[primitive].ufunc)(*args, out=target, casting="unsafe")


def _scratch_array(xp: Any, index: int, shape: tuple, dtype: Any) -> Any:
    """A per-thread scratch array for register ``index``, reused across calls (grown as needed)."""
    pool = getattr(_scratch, "buffers", None)
    if pool is None:
        pool = _scratch.buffers = {}
    nbytes = int(dtype.itemsize)
    for dim in shape:
        nbytes *= int(dim)
    buffer = pool.get((id(xp), index))
    if buffer is None or buffer.size < nbytes:
        buffer = xp.empty(max(nbytes, 1), dtype="uint8")
        pool[(id(xp), index)] = buffer
    return buffer[:nbytes].view(dtype).reshape(shape)


@lru_cache(maxsize=1024)
def _xp_plan(text: str) -> _XpPlan:
    return _XpPlan(parse_program(text))


@lru_cache(maxsize=1024)
def _numexpr_form(text: str) -> tuple[str, dict[str, float], bool] | None:
    """numexpr's expression, its constants and whether every primitive is arithmetic (or None)."""
    program = parse_program(text)
    if not numexpr_supported(program):
        return None
    return (*render_numexpr(program), all(step[0] in NUMEXPR_FAST for step in program.steps))


def run_program(xp: Any, text: str, inputs: list, out: Any) -> None:
    """Evaluate the program ``text`` over ``inputs`` into ``out`` (numexpr when config allows)."""
    mode = _mode or _numexpr_mode()
    if mode != "never" and xp.__name__ == "numpy":
        numexpr = _numexpr_module()
        form = _numexpr_form(text) if numexpr is not None else None
        if form is not None and (mode == "always" or _numexpr_pays(form[2], inputs, out)):
            expression, constants, _ = form
            scalar = out.dtype.type
            names = {f"x{i}": array for i, array in enumerate(inputs)}
            names.update((name, scalar(value)) for name, value in constants.items())
            numexpr.evaluate(expression, local_dict=names, out=out, casting="unsafe")
            return
    plan = _xp_plan(text)
    if any(_overlaps(xp, array, out) for array in inputs):
        # the plan uses ``out`` as a register, so an input stored in ``out`` (grad_req='add' sums into the
        # gradient array it reads; the planner gives a fused node an input's memory in place) would be
        # overwritten before it is read: compute aside, then copy. Block by block when every input has the
        # output's shape and layout (position i of the output depends on position i of the inputs alone),
        # so that the aside is a small buffer, not a copy of the output (ResNet-50's residual add and relu
        # took 100 MB per call at batch 32)
        if _blockwise(xp, inputs, out):
            _run_in_blocks(xp, plan, inputs, out)
            return
        result = xp.empty_like(out)
        plan.run(xp, inputs, result)
        xp.copyto(out, result)
        return
    plan.run(xp, inputs, out)


#: elements per block of an in-place program computed aside block by block (a 1 MB float32 buffer per thread)
BLOCK_ELEMENTS = 1 << 18


def _blockwise(xp: Any, inputs: list, out: Any) -> bool:
    """Whether the program can run over flat blocks: numpy, a C-contiguous output, and every input a
    C-contiguous array of its shape that either is the output's memory exactly or does not overlap it."""
    if xp.__name__ != "numpy" or not out.flags.c_contiguous or out.size <= BLOCK_ELEMENTS:
        return False
    for array in inputs:
        if not hasattr(array, "shape") or array.shape != out.shape or not array.flags.c_contiguous:
            return False
        if xp.may_share_memory(array, out) and array.ctypes.data != out.ctypes.data:
            return False
    return True


def _run_in_blocks(xp: Any, plan: _XpPlan, inputs: list, out: Any) -> None:
    flat_out = out.reshape(-1)
    flat_inputs = [array.reshape(-1) for array in inputs]
    # register 0 is the output: the plan's own scratch registers are 1 and up
    aside = _scratch_array(xp, 0, (BLOCK_ELEMENTS,), out.dtype)
    for start in range(0, flat_out.size, BLOCK_ELEMENTS):
        stop = min(start + BLOCK_ELEMENTS, flat_out.size)
        block = aside[:stop - start]
        plan.run(xp, [array[start:stop] for array in flat_inputs], block)
        flat_out[start:stop] = block


def _overlaps(xp: Any, array: Any, out: Any) -> bool:
    return hasattr(array, "shape") and bool(xp.may_share_memory(array, out))


def _fused_kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    run_program(xp, params["expression"], list(inputs), outputs[0])


def _fused_shape(params: dict, in_shapes: list) -> list:
    shape = tuple(in_shapes[0])
    for other in in_shapes[1:]:
        shape = broadcast_shape(shape, tuple(other), "_FusedElemwise")
    return [shape]


def _fused_dtype(params: dict, in_dtypes: list) -> list:
    program = parse_program(params["expression"])
    for i, dtype in enumerate(in_dtypes):
        if dtype is not None and str(dtype) != program.dtype:
            raise FusedProgramError(f"_FusedElemwise: input {i} has dtype {dtype}, the expression computes in "
                                    f"{program.dtype}; every input must have the expression's dtype")
    return [program.dtype]


def _num_inputs(params: dict) -> int:
    return parse_program(params["expression"]).num_inputs


FUSED_ELEMWISE = define(OpDef(
    name="_FusedElemwise", infer_shape=_fused_shape, kernel=_fused_kernel, infer_dtype=_fused_dtype,
    params=schema([Param("expression", "str", doc="The JSON program (see mxkit.ndarray.ops._fused_program)."),
                   Param("nodes", "str", "", doc="Names of the nodes the expression replaced, comma separated.")]),
    num_inputs=_num_inputs, input_names=lambda p: tuple(f"x{i}" for i in range(_num_inputs(p))),
    # the output may take any input's memory as the unfused chain's operators could: every kernel
    # reads an element before writing it, and the ufunc plan computes aside when out is an input
    inplace=lambda p: tuple((i, 0, False) for i in range(_num_inputs(p))),
    doc="An elementwise expression over broadcast inputs, computed in one pass (made by the fuse pass).",
))


__all__ = ["BLOCK_ELEMENTS", "FUSED_ELEMWISE", "NUMEXPR_FAST", "NUMEXPR_MIN_CORES", "NUMEXPR_MIN_ELEMENTS",
           "numexpr_available", "run_program", "use_numexpr"]
