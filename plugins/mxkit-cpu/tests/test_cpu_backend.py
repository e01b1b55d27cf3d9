"""The CPU backend plugin: registration through the public hook, allocation, devices, kernels."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.plugins import get_backend, plugin_info, registry
from mxkit.ndarray.registry import get_op
from mxkit_cpu import kernels
from mxkit_cpu.backend import ALIGNMENT, POOL_MIN_BYTES, SMALL_LIMIT, CPUBackend

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)


def test_registered_as_an_entry_point_plugin():
    spec = get_backend("cpu")
    assert spec.name == "numpy"
    names = [name for name, _, origin in registry("backend").items()]
    assert "cpu" in names
    origins = {name: origin for name, _, origin in registry("backend").items()}
    assert origins["cpu"].distribution == "mxkit-cpu"
    assert plugin_info("cpu").distribution == "mxkit-cpu"


@pytest.mark.parametrize("shape, dtype", [((3,), "float32"), ((7, 5), "float64"), ((0,), "int8"),
                                          ((1000, 3), "float16"), ((SMALL_LIMIT,), "uint8"), ((), "int64"),
                                          ((SMALL_LIMIT + 1,), "uint8"), ((128, 10), "float32"),
                                          ((POOL_MIN_BYTES - 8,), "float64"), ((128, 128), "float32"),
                                          ((3, 1, 28, 28), "float32")])
@pytest.mark.parametrize("route", ["empty", "_empty_in_python"])  # (compiled when built, and the Python one)
def test_allocation_is_aligned_writable_and_independent(shape, dtype, route):
    empty = getattr(CPUBackend(0), route)
    arrays = [empty(shape, np.dtype(dtype) if route == "empty" else dtype) for _ in range(3)]
    for array in arrays:
        assert array.shape == shape and array.dtype == np.dtype(dtype)
        assert array.ctypes.data % ALIGNMENT == 0 and array.flags.writeable and array.flags.c_contiguous
    if arrays[0].size:
        for i, array in enumerate(arrays):
            array[...] = i
        assert [int(np.asarray(a).reshape(-1)[0]) for a in arrays] == [0, 1, 2]


def test_each_allocation_route_keeps_its_memory_alive_and_apart():
    # the slab (small), a buffer of its own (mid-sized) and the pool (large) each give arrays whose
    # memory lives as long as they do, and never the memory of an array still in use
    import gc

    backend = CPUBackend(0)
    for count in (SMALL_LIMIT // 8, SMALL_LIMIT, 20_000, POOL_MIN_BYTES):
        kept = [backend.empty((count,), np.dtype("float32")) for _ in range(4)]
        for index, array in enumerate(kept):
            array[...] = index
        for _ in range(50):
            backend.empty((count,), np.dtype("float32"))[...] = -1  # dropped at once: may be reused
        gc.collect()
        assert [float(array[0]) for array in kept] == [0, 1, 2, 3] and all((a == a[0]).all() for a in kept)
        assert len({array.ctypes.data for array in kept}) == 4


def test_the_compiled_headers_check_the_memory_they_describe():
    from mxkit_cpu import _alloc

    with pytest.raises(ValueError, match="needs more than the 10 bytes"):
        _alloc.shaped(np.empty(10, np.uint8), (4,), np.dtype(np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        _alloc.shaped(np.empty((4, 4), np.float32)[:, ::2], (8,), np.dtype(np.float32))
    with pytest.raises(ValueError, match="negative dimensions"):
        _alloc.aligned_empty((-1, 4), np.dtype(np.float32), 4)
    with pytest.raises(ValueError, match="needs more than the 16 bytes"):  # a product that would overflow
        _alloc.shaped(np.empty(16, np.uint8), (2**40, 2**40, 2**40), np.dtype(np.float32))
    assert _alloc.shaped(np.empty(16, np.uint8), (2**40, 0), np.dtype(np.float32)).shape == (2**40, 0)
    assert _alloc.shaped(np.empty(4, np.uint8), (), np.dtype(np.float32)).shape == ()
    buffer = np.arange(12, dtype=np.float32)
    view = _alloc.shaped(buffer, (3, 2), np.dtype(np.float64))
    np.testing.assert_array_equal(view, buffer.view(np.float64).reshape(3, 2))
    assert view.base is buffer and view.flags.c_contiguous and view.flags.writeable


def test_the_compiled_address_is_numpys():
    from mxkit_cpu import backend

    for array in (np.empty(5000, np.uint8), np.empty((7, 9), np.float32)[1:, 2:], np.empty(0)):
        assert backend._address(array) == backend._address_by_ctypes(array) == array.ctypes.data


def test_from_host_copies():
    host = np.arange(5.0)
    device = CPUBackend(0).from_host(host)
    host[0] = 99
    assert device[0] == 0 and device.ctypes.data % ALIGNMENT == 0
    assert CPUBackend(0).to_host(device) is device


def test_cpu_ids_are_distinct_devices():
    a = mx.nd.ones((2,), ctx=mx.cpu(0))
    b = mx.nd.ones((2,), ctx=mx.cpu(3))
    assert b.context == mx.cpu(3) and mx.cpu(3).backend is not mx.cpu(0).backend
    with pytest.raises(mx.MXKitError, match="different devices"):
        a + b
    assert (a + b.as_in_context(mx.cpu(0))).asnumpy().tolist() == [2, 2]


def test_plugin_kernels_are_the_ones_used():
    compiled = kernels._compiled_kernels()  # they take precedence (tanh, sigmoid: one vectorized pass)
    for name, kernel in kernels.KERNELS.items():
        registered, expected = get_op(name).kernels.get("numpy"), compiled.get(name, kernel)
        # a kernel plugin (mxkit-onednn) may serve in front of it, keeping it for the cases it does not cover
        assert registered is expected or getattr(registered, "replaced", None) is expected, name


@pytest.mark.parametrize("name", sorted(n for n in kernels.KERNELS if not n.startswith("_backward")))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_plugin_kernels_agree_with_generic_kernels(name, dtype):
    op = get_op(name)
    rng = np.random.default_rng(0)
    count = op.count_inputs(op.parse_params({}))
    inputs = [(np.abs(rng.standard_normal((4, 6))) + 0.1).astype(dtype) for _ in range(count)]
    params = op.parse_params({})
    expected = [np.empty((4, 6), dtype)]
    got = [np.empty((4, 6), dtype)]
    op.kernel(np, inputs, expected, params)
    kernels.KERNELS[name](np, inputs, got, params)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6 if dtype == "float32" else 1e-12)


def test_integer_inputs_still_work_through_plugin_kernels():
    x = mx.nd.array([-2, 3], dtype="int32")
    assert mx.nd.relu(x).asnumpy().tolist() == [0, 3]
    assert mx.nd.abs(x).asnumpy().tolist() == [2, 3]


def test_rng_is_seeded():
    backend = CPUBackend(0)
    assert backend.make_rng(5).random() == backend.make_rng(5).random()


def test_large_buffers_are_recycled_only_when_unused():
    import mxkit.ndarray as nd

    # the pool is the process's: work an earlier test left on the engine must not take the buffer freed below
    nd.waitall()
    backend = CPUBackend(0)
    shape, dtype = (40_000,), np.dtype("float32")  # 160 kB: pooled
    first = backend.empty(shape, dtype)
    address = first.ctypes.data
    assert backend.empty(shape, dtype).ctypes.data != address  # still in use
    view = first[5:9]
    del first
    assert backend.empty(shape, dtype).ctypes.data != address  # a view keeps the memory busy
    view[:] = 7
    del view
    again = backend.empty(shape, dtype)
    assert again.ctypes.data == address and again.ctypes.data % ALIGNMENT == 0


def test_ndarray_results_stay_correct_with_recycling():
    a = mx.nd.array(np.arange(100_000, dtype=np.float32))
    results = [a * float(i) for i in range(12)]  # more live results than the pool keeps per size
    for i, result in enumerate(results):
        assert result.asnumpy()[-1] == 99_999 * i


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
def test_cython_take_gradient_matches_numpy_add_at(dtype, mode):
    from mxkit_cpu._scatter import scatter_add_rows  # noqa: F401  (the extension must be built)

    rng = np.random.default_rng(4)
    data = rng.standard_normal((6, 3, 2)).astype(dtype)
    # 'raise' takes only [0, 6) (MXNet's rule), 'wrap' any index, 'clip' clips the ones past the end
    low, high = {"clip": (0, 20), "wrap": (-6, 20), "raise": (0, 6)}[mode]
    indices = rng.integers(low, high, size=(5, 4))
    out_grad = rng.standard_normal((5, 4, 3, 2)).astype(dtype)
    op = get_op("_backward_take")
    params = op.parse_params({"axis": 0, "mode": mode})
    expected, got = [np.empty_like(data)], [np.empty_like(data)]
    op.kernel(np, [out_grad, data, indices.astype(np.float32)], expected, params)
    kernels.backward_take(np, [out_grad, data, indices.astype(np.float32)], got, params)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)


def test_small_arrays_from_many_threads_never_overlap():
    # the slab offset is bumped without a lock (see _alloc.pyx): threads allocating at once
    # must still get disjoint memory
    import itertools
    import threading

    backend = CPUBackend(0)
    results: list[list[np.ndarray]] = [[] for _ in range(4)]

    def allocate(slot):
        for i in range(3000):
            array = backend.empty((3 + i % 40,), np.dtype("float32"))
            array[...] = slot
            results[slot].append(array)

    threads = [threading.Thread(target=allocate, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for arrays in results for a in arrays)
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
    for slot, arrays in enumerate(results):
        assert all((array == slot).all() and array.ctypes.data % ALIGNMENT == 0 for array in arrays)


def test_a_small_array_keeps_its_slab_alive():
    import gc

    backend = CPUBackend(0)
    kept = backend.empty((4,), np.dtype("float64"))
    kept[...] = [1, 2, 3, 4]
    for _ in range(5000):  # several slabs' worth: the first slab is no longer the current one
        backend.empty((16,), np.dtype("float64"))
    gc.collect()
    assert kept.tolist() == [1, 2, 3, 4] and kept.base is not None and kept.flags.owndata is False


@pytest.mark.parametrize("route", ["empty", "_empty_in_python"])
def test_allocation_takes_any_sequence_shape_and_dtype_spelling(route):
    empty = getattr(CPUBackend(0), route)
    for shape in ([2, 3], (np.int64(40), 30), range(1, 4)):
        for dtype in ("int16", np.float32, np.dtype("float64")):
            array = empty(shape, dtype)
            assert array.shape == tuple(int(d) for d in shape) and array.dtype == np.dtype(dtype)
            assert array.ctypes.data % ALIGNMENT == 0


@pytest.mark.parametrize("route", ["empty", "_empty_in_python"])
def test_allocation_refuses_negative_and_unaddressable_shapes(route):
    empty = getattr(CPUBackend(0), route)
    with pytest.raises(ValueError, match="negative"):
        empty((4, -1), np.dtype("float32"))
    with pytest.raises((ValueError, MemoryError, OverflowError)):
        empty((2**40, 2**40), np.dtype("float32"))
    with pytest.raises((ValueError, MemoryError, OverflowError)):
        empty((2**62,), np.dtype("float64"))  # the elements fit a Py_ssize_t, their bytes do not
    assert empty((2**20, 0), np.dtype("float32")).shape == (2**20, 0)


def test_the_scratch_of_every_thread_is_reported_and_released():
    """Kernel scratch kept by any thread counts in memory_stats()['scratch']; release_scratch (the backend's,
    or mxkit-ndarray's for every device of a backend name) drops what no kernel uses, a live thread's too;
    a thread that ends takes its own with it."""
    import threading

    from mxkit.core.context import cpu
    from mxkit.ndarray.backend import backend_of, release_scratch
    from mxkit_cpu import parallel

    backend = backend_of(cpu())
    parallel.clear_scratch()
    holding, finish = threading.Event(), threading.Event()

    def worker():
        parallel.scratch("columns", (1000,), np.float32)
        holding.set()
        finish.wait(30)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert holding.wait(30)
        parallel.scratch("products", (10,), np.float64)
        assert parallel.scratch_bytes() == 4000 + 80
        assert backend.memory_stats()["scratch"] == 4000 + 80
        assert release_scratch(backend.name) == 4000 + 80
        assert backend.memory_stats()["scratch"] == 0
        again = parallel.scratch("products", (10,), np.float64)  # a kernel asking again gets a new buffer
        assert again.shape == (10,) and parallel.scratch_bytes() == 80
    finally:
        finish.set()
        thread.join()
    ended = threading.Thread(target=lambda: parallel.scratch("columns", (1000,), np.float32))
    ended.start()
    ended.join()
    import gc

    gc.collect()
    assert parallel.scratch_bytes() == 80


def test_memory_stats_tells_pooled_buffers_in_use_from_free_ones():
    from mxkit.core.context import cpu
    from mxkit.ndarray.backend import backend_of

    backend = backend_of(cpu())
    before = backend.memory_stats()
    array = backend.empty((1 << 16,), np.float32)  # 256 KiB: pooled
    during = backend.memory_stats()
    assert during["pooled"] - during["pooled_free"] >= before["pooled"] - before["pooled_free"] + array.nbytes
    del array
    after = backend.memory_stats()
    assert after["pooled_free"] >= during["pooled_free"] + (1 << 18)
