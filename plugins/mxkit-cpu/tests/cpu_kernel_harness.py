"""Running one operator through the CPU plugin's kernel or the generic ``xp`` kernel, and direct
numpy formulations of convolution and pooling (loops over windows: the definitions) to check both."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
from mxkit.ndarray.registry import get_registry
from mxkit_cpu import parallel
from threadpoolctl import threadpool_limits


class _RecordingRegistry:
    """Takes the kernels mxkit-cpu's hook registers, to test them whichever plugin serves the registry."""

    def __init__(self) -> None:
        self.kernels: dict[str, object] = {}

    def register_kernel(self, name, backend, kernel, when_defined=False):
        self.kernels[name] = kernel


_CPU_KERNELS: dict[str, object] = {}


def cpu_kernel(name: str):
    """mxkit-cpu's own kernel of operator ``name`` (another kernel plugin, such as mxkit-onednn, may have
    replaced it in the registry), else the registry's kernel for ``numpy``."""
    if not _CPU_KERNELS:
        from mxkit_cpu.kernels import register

        recorder = _RecordingRegistry()
        register(recorder)
        _CPU_KERNELS.update(recorder.kernels)
    return _CPU_KERNELS.get(name) or get_registry().get(name).kernel_for("numpy")


def run(name: str, inputs: list, generic: bool = False, req: list | None = None, **params) -> list[np.ndarray]:
    """Outputs of operator ``name`` on numpy ``inputs``: the plugin's kernel, or the generic one."""
    op = get_registry().get(name)
    typed = op.parse_params(params)
    shapes = op.infer_shape(typed, [x.shape for x in inputs])
    dtypes = op.infer_dtype(typed, [x.dtype.name for x in inputs])
    outputs = [np.full(s, np.nan, dtype=d) if np.dtype(d).kind == "f" else np.zeros(s, dtype=d)
               for s, d in zip(shapes, dtypes)]
    kernel = op.kernel if generic else cpu_kernel(name)
    if req is not None:
        typed = dict(typed, _req=req)
    kernel(np, list(inputs), outputs, typed)
    return outputs


def is_plugin_kernel(name: str) -> bool:
    op = get_registry().get(name)
    return cpu_kernel(name) is not op.kernel


@contextlib.contextmanager
def split_into_blocks(threads: int = 3):
    """Make every kernel split its batch across ``threads`` threads, however small the work
    (BLAS limited to one thread, as the engine runs it, so that the products split too)."""
    saved = parallel.MIN_PARALLEL_WORK
    parallel.reset()
    parallel._threads = threads
    parallel.MIN_PARALLEL_WORK = 0
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        parallel.MIN_PARALLEL_WORK = saved
        parallel.reset()


def direct_convolution(x, w, b, stride, pad, dilate, groups):
    """Convolution by explicit loops over output positions (the definition), in float64."""
    n, c = x.shape[:2]
    f = w.shape[0]
    kernel = w.shape[2:]
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_spatial = [(s + 2 * p - d * (k - 1) - 1) // step + 1
                   for s, p, d, k, step in zip(x.shape[2:], pad, dilate, kernel, stride)]
    out = np.zeros((n, f, *out_spatial))
    cin, cout = c // groups, f // groups
    for position in itertools.product(*(range(o) for o in out_spatial)):
        window = tuple(slice(o * step, o * step + d * (k - 1) + 1, d)
                       for o, step, d, k in zip(position, stride, dilate, kernel))
        patch = padded[(slice(None), slice(None), *window)]
        for g in range(groups):
            block = patch[:, g * cin:(g + 1) * cin]
            filters = w[g * cout:(g + 1) * cout].astype(np.float64)
            out[(slice(None), slice(g * cout, (g + 1) * cout), *position)] = \
                np.tensordot(block, filters, axes=(list(range(1, block.ndim)), list(range(1, filters.ndim))))
    if b is not None:
        out += b.reshape((1, -1) + (1,) * len(kernel))
    return out


def direct_convolution_gradients(out_grad, x, w, stride, pad, dilate, groups):
    """Data, weight and bias gradients of :func:`direct_convolution` by the same loops (float64)."""
    c = x.shape[1]
    f = w.shape[0]
    kernel = w.shape[2:]
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    data_grad = np.zeros_like(padded)
    weight_grad = np.zeros(w.shape)
    cin, cout = c // groups, f // groups
    for position in itertools.product(*(range(o) for o in out_grad.shape[2:])):
        window = tuple(slice(o * step, o * step + d * (k - 1) + 1, d)
                       for o, step, d, k in zip(position, stride, dilate, kernel))
        patch = padded[(slice(None), slice(None), *window)]
        g_here = out_grad[(slice(None), slice(None), *position)].astype(np.float64)  # (N, F)
        for g in range(groups):
            grads = g_here[:, g * cout:(g + 1) * cout]
            weight_grad[g * cout:(g + 1) * cout] += np.tensordot(grads, patch[:, g * cin:(g + 1) * cin], axes=(0, 0))
            data_grad[(slice(None), slice(g * cin, (g + 1) * cin), *window)] += \
                np.tensordot(grads, w[g * cout:(g + 1) * cout].astype(np.float64), axes=(1, 0))
    crop = (slice(None), slice(None), *(slice(p, p + s) for p, s in zip(pad, x.shape[2:])))
    return data_grad[crop], weight_grad, out_grad.astype(np.float64).sum(axis=(0, *range(2, out_grad.ndim)))


def direct_pooling(x, pool_type, kernel, stride, pad, out_spatial, include_pad):
    """Pooling by a loop over output positions; cells outside the input are padding (lowest / 0)."""
    n, c = x.shape[:2]
    out = np.zeros((n, c, *out_spatial), dtype=x.dtype)
    lowest = np.finfo(x.dtype).min
    for position in itertools.product(*(range(o) for o in out_spatial)):
        starts = [o * s - p for o, s, p in zip(position, stride, pad)]
        cells, inside_pad, inside = [], 0, 0
        for offset in itertools.product(*(range(k) for k in kernel)):
            index = [s + o for s, o in zip(starts, offset)]
            within = all(0 <= i < size for i, size in zip(index, x.shape[2:]))
            inside_pad += all(-p <= i < size + p for i, size, p in zip(index, x.shape[2:], pad))
            inside += within
            cells.append(x[(slice(None), slice(None), *index)] if within
                         else np.full((n, c), lowest if pool_type == "max" else 0, dtype=x.dtype))
        stack = np.stack(cells)
        if pool_type == "max":
            value = np.maximum.reduce(stack)
        else:
            value = stack.astype(np.float64).sum(axis=0)
            if pool_type == "avg":
                value = value / max(inside_pad if include_pad else inside, 1)
        out[(slice(None), slice(None), *position)] = value
    return out


def direct_max_pool_gradient(out_grad, x, output, kernel, stride, pad):
    """The gradient of max pooling: each window's to its first cell (row-major) equal to the output."""
    grad = np.zeros(x.shape)
    lowest = np.finfo(x.dtype).min
    for index in itertools.product(*(range(s) for s in output.shape)):
        n, c, *position = index
        starts = [o * s - p for o, s, p in zip(position, stride, pad)]
        for offset in itertools.product(*(range(k) for k in kernel)):
            cell = [s + o for s, o in zip(starts, offset)]
            within = all(0 <= i < size for i, size in zip(cell, x.shape[2:]))
            value = x[(n, c, *cell)] if within else lowest
            if value == output[index]:
                if within:
                    grad[(n, c, *cell)] += out_grad[index]
                break
    return grad
