"""``sgd_update``, ``sgd_mom_update`` and ``adam_update`` in one pass over memory (:mod:`mxkit_cpu._update`).

The operators are mxkit-ndarray's (:mod:`mxkit.ndarray.ops.optimizer_update`); these
kernels override its generic ones for backend ``numpy``. The results equal the generic
kernels' to the bit; arrays the loops
do not cover (mixed or non-float dtypes, non-contiguous) go to the generic kernels.
"""

from __future__ import annotations

from typing import Any

from mxkit_cpu import _update
from mxkit_cpu.conv import generic_kernel
from mxkit_cpu.kernels import flat_real_views


def _one_pass(name: str, loop: Any, extra: tuple[str, ...]) -> Any:
    def kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        flat = flat_real_views([*inputs, *outputs])
        if flat is None:
            generic_kernel(name, xp, inputs, outputs, params)
            return
        loop(*flat, params["lr"], params["wd"], params["rescale_grad"], params["clip_gradient"],
             *(params[key] for key in extra))

    kernel.__name__ = name
    kernel.__doc__ = f"``{name}`` in one pass over memory (else the generic kernel)."
    return kernel


#: operator name -> kernel (operators that mxkit-train defines)
KERNELS = {
    "sgd_update": _one_pass("sgd_update", _update.sgd, ()),
    "sgd_mom_update": _one_pass("sgd_mom_update", _update.sgd_mom, ("momentum",)),
    "adam_update": _one_pass("adam_update", _update.adam, ("beta1", "beta2", "epsilon")),
}

__all__ = ["KERNELS"]
