"""Independent work really runs in parallel: GIL-releasing numpy on two workers, and
asynchronous operations (I/O stand-ins) overlapping with compute.

Timings are compared with a baseline measured in the same run, with generous margins
and retries, because the machine may be shared.
"""

import os
import subprocess
import sys
import textwrap
import threading
import time

import mxkit.engine as engine
import pytest

np = pytest.importorskip("numpy")

MATMUL_SCRIPT = textwrap.dedent("""
    import sys
    import threading
    import time
    import numpy as np
    import mxkit.engine as engine

    rng = np.random.default_rng(0)
    a = rng.standard_normal((700, 700))
    b = rng.standard_normal((700, 700))

    def work(out, key):
        def op():
            c = a
            for _ in range(4):
                c = np.tanh(c @ b * 0.01)
            out[key] = c
        return op

    def timed(fn):
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def on_two_threads(out):
        threads = [threading.Thread(target=work(out, k)) for k in "xy"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def on_engine(out):
        eng.push(work(out, "x"), writes=(x,))
        eng.push(work(out, "y"), writes=(y,))
        eng.wait_all()

    eng = engine.create(sys.argv[1], num_workers=2)
    x, y = eng.new_var(), eng.new_var()
    for attempt in range(8):
        serial, raw, pushed = {}, {}, {}
        serial_s = timed(lambda: (work(serial, "x")(), work(serial, "y")()))
        threads_s = timed(lambda: on_two_threads(raw))
        engine_s = timed(lambda: on_engine(pushed))
        assert all(np.array_equal(pushed[k], serial[k]) for k in "xy")
        print(f"{serial_s:.4f} {threads_s:.4f} {engine_s:.4f}")
        if serial_s / engine_s > 1.4:
            break
""")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["threaded", "threaded_per_device"])
def test_two_independent_matrix_products_run_in_parallel(name):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    single_threaded_blas = {var: "1" for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", MATMUL_SCRIPT, name], capture_output=True, text=True,
                            timeout=120,
                            env={**os.environ, **single_threaded_blas})
    assert result.returncode == 0, result.stderr
    attempts = [tuple(map(float, line.split())) for line in result.stdout.split("\n") if line.strip()]
    # Two cores: ideally 2x. When other processes hold the cores, two plain threads
    # cannot speed up either; then the engine must merely keep up with them.
    ok = [serial / pushed > 1.3 or (serial / threads < 1.3 and pushed < 1.25 * threads)
          for serial, threads, pushed in attempts]
    assert any(ok), f"(serial, two threads, engine) seconds per attempt: {attempts}"


@pytest.mark.parametrize("name", ["threaded", "threaded_per_device"])
def test_async_operation_overlaps_with_compute_on_a_single_worker(name):
    eng = engine.create(name, num_workers=1)
    try:
        io_var, compute_var = eng.new_var(), eng.new_var()
        delay = 0.3

        def start_io(on_complete):
            threading.Timer(delay, on_complete).start()  # the "I/O" finishes later, elsewhere

        def compute():
            end = time.perf_counter() + delay
            while time.perf_counter() < end:
                np.dot(np.ones((64, 64)), np.ones((64, 64)))

        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            eng.push_async(start_io, writes=(io_var,), name="io")
            eng.push(compute, writes=(compute_var,), name="compute")
            eng.wait_all()
            best = min(best, time.perf_counter() - start)
            if best < 1.5 * delay:
                break
        assert best < 1.6 * delay, f"async I/O and compute took {best:.2f}s; serial would be {2 * delay:.2f}s"
        assert io_var.version == compute_var.version >= 1
    finally:
        eng.shutdown()
