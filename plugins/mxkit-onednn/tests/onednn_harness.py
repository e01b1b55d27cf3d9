"""Running one operator through the oneDNN kernel, the mxkit-cpu kernel it replaced, or the generic
kernel in float64 (the reference), and the error bound of float32 sums that the comparisons use."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.ndarray.registry import get_registry

#: unit roundoff of float32
UNIT = float(np.finfo(np.float32).eps) / 2


def onednn_loaded() -> bool:
    from mxkit_onednn.library import load

    return load() is not None


needs_onednn = pytest.mark.skipif(not onednn_loaded(), reason="oneDNN is not loadable here")


@pytest.fixture(params=["blocked", "plain"])
def layout(request):
    """Each oneDNN program of an operator on its own (not the fastest of them and the replaced kernel)."""
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    PROGRAMS.only = request.param
    yield request.param
    PROGRAMS.only = None
    PROGRAMS.clear()


def _outputs(name: str, inputs: list, params: dict, dtype=None):
    op = get_registry().get(name)
    typed = op.parse_params(params)
    shapes = op.infer_shape(typed, [x.shape for x in inputs])
    dtypes = op.infer_dtype(typed, [x.dtype.name for x in inputs])
    return op, typed, [np.full(s, np.nan, dtype=dtype or d) for s, d in zip(shapes, dtypes)]


def run(name: str, inputs: list, which: str = "onednn", req: list | None = None, **params) -> list[np.ndarray]:
    """Outputs of operator ``name`` on numpy ``inputs`` through the registered (oneDNN) kernel, the kernel
    it replaced (``"cpu"``), the generic kernel in float64 (``"reference"``) or in the inputs' dtype
    (``"generic"``)."""
    if which == "reference":
        inputs = [x.astype(np.float64) for x in inputs]
    op, typed, outputs = _outputs(name, inputs, params)
    kernel = op.kernel_for("numpy")
    if which == "cpu":
        kernel = kernel.replaced
    elif which in ("reference", "generic"):
        kernel = op.kernel
    if req is not None:
        typed = dict(typed, _req=req)
    kernel(np, list(inputs), outputs, typed)
    return outputs


def sum_bound(terms: int, magnitude: np.ndarray) -> np.ndarray:
    """The rounding error bound of a float32 sum of ``terms`` products whose absolute values add up to
    ``magnitude``: gamma_K = K u / (1 - K u) (any summation order, with or without FMA), doubled
    to cover the rounding of the result and the float64 reference."""
    k = terms + 1
    return 2 * k * UNIT / (1 - k * UNIT) * np.abs(magnitude) + np.finfo(np.float32).tiny


def assert_within(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str) -> None:
    error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    worst = np.argmax(error - bound) if error.size else 0
    assert np.all(error <= bound), (f"{what}: error {error.flat[worst]:.3g} over the bound {bound.flat[worst]:.3g} "
                                    f"at flat index {worst}")


def assert_served_by_onednn(name: str) -> None:
    """Every cached program of operator ``name`` is oneDNN's (none fell back to the replaced kernel)."""
    from mxkit_onednn.program import PROGRAMS

    chosen = {key: value for key, value in PROGRAMS.chosen().items() if key[0] == name}
    assert chosen and "fallback" not in chosen.values(), (chosen, PROGRAMS.refusals)
