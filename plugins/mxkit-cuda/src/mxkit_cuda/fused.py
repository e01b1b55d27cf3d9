"""Fused elementwise nodes compiled into one ``cupy.ElementwiseKernel`` each.

The fuse pass of mxkit-symbol replaces a chain like ``a * b + 1`` with one
``_FusedElemwise`` node whose program (see :mod:`mxkit.ndarray.kernels`)
renders to C statements. Here that body becomes a CUDA kernel, compiled once per program
(the program holds the dtype) and cached: one read of each input and one write of the
output, however long the chain.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from mxkit.ndarray.kernels import parse_program, render_c_body


@functools.lru_cache(maxsize=1024)
def compiled_kernel(expression: str) -> Any:
    """The ElementwiseKernel of a program's JSON text (compiled by CuPy on first launch)."""
    import cupy

    program = parse_program(expression)
    names = [f"x{i}" for i in range(program.num_inputs)]
    ctype = "float" if program.dtype == "float32" else "double"
    body = render_c_body(program, names, out="out", ctype=ctype)
    digest = hashlib.sha1(expression.encode()).hexdigest()[:12]
    return cupy.ElementwiseKernel(", ".join(f"T {n}" for n in names), "T out", body,
                                  name=f"mxkit_fused_{digest}")


def fused_elemwise(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Run the node's program as one kernel writing straight into the output."""
    compiled_kernel(params["expression"])(*inputs, outputs[0])
