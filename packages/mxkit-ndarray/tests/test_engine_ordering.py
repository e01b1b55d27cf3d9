"""Views, in-place updates and random numbers stay ordered on the threaded engine (against a serial replay)."""

from types import SimpleNamespace

import mxkit.core
import mxkit.engine as engine
import mxkit.ndarray
import numpy as np
import pytest

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)


@pytest.fixture(params=["naive", "threaded", "threaded_per_device"])
def engine_name(request):
    previous = engine.set_engine(engine.create(request.param))
    try:
        yield request.param
    finally:
        if previous is None:  # the test's engine must not outlive it: the next get() builds the configured one
            engine.reset()
        current = engine.set_engine(previous) if previous is not None else None
        if current is not None and current is not previous:
            current.wait_all()


def test_writes_through_views_are_ordered_with_parent(engine_name):
    rng = np.random.default_rng(5)
    x = mx.nd.zeros((8, 16))
    ref = np.zeros((8, 16), np.float32)
    for step in range(60):
        row = int(rng.integers(0, 8))
        kind = step % 4
        if kind == 0:
            view = x[row]
            view += step
            ref[row] += step
        elif kind == 1:
            x[row:row + 2, ::3] = step
            ref[row:row + 2, ::3] = step
        elif kind == 2:
            x *= 0.5
            ref *= 0.5
        else:
            flat = x.reshape((-1,))
            flat[row * 3:row * 3 + 5] = flat[row:row + 5] + 1
            ref.reshape(-1)[row * 3:row * 3 + 5] = ref.reshape(-1)[row:row + 5] + 1
    np.testing.assert_allclose(x.asnumpy(), ref, rtol=1e-6)


def test_reads_see_earlier_writes_and_not_later_ones(engine_name):
    x = mx.nd.ones((256, 256))
    snapshots = []
    for i in range(20):
        snapshots.append(x.sum())
        x += 1
        x[i] = -i
    expected = np.ones((256, 256))
    for i, snapshot in enumerate(snapshots):
        assert snapshot.asscalar() == pytest.approx(expected.sum())
        expected += 1
        expected[i] = -i
    np.testing.assert_allclose(x.asnumpy(), expected)


def test_chain_of_operators_matches_numpy_replay(engine_name):
    rng = np.random.default_rng(6)
    host = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(4)]
    arrays = [mx.nd.array(h) for h in host]
    for step in range(90):
        i, j, k = (int(v) for v in rng.integers(0, 4, size=3))
        if step % 3 == 0:
            arrays[k] = mx.nd.dot(arrays[i], arrays[j]) * 0.05
            host[k] = (host[i] @ host[j]) * np.float32(0.05)
        elif step % 3 == 1:
            arrays[k] += mx.nd.tanh(arrays[i]) - arrays[j]
            host[k] += np.tanh(host[i]) - host[j]
        else:
            arrays[i][:, 0:4] = arrays[j][:, 4:8]
            host[i][:, 0:4] = host[j][:, 4:8].copy() if i == j else host[j][:, 4:8]
    for got, ref in zip(arrays, host):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-4, atol=1e-4)


def test_seeded_random_is_reproducible_on_every_engine(engine_name):
    mx.random.seed(42)
    first = [mx.nd.random.uniform(shape=(5,)).asnumpy(), mx.nd.random.normal(shape=(3,)).asnumpy()]
    mx.random.seed(42)
    second = [mx.nd.random.uniform(shape=(5,)), mx.nd.random.normal(shape=(3,))]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b.asnumpy())


def test_in_flight_limit_waits_without_changing_results_or_errors(engine_name, monkeypatch):
    from mxkit.core.errors import EngineError
    from mxkit.ndarray.invoke import in_flight

    monkeypatch.setattr(in_flight, "limit", 300_000)  # about two 100k-element float32 outputs
    a = mx.nd.array(np.arange(100_000, dtype=np.float32))
    bad = None
    results = []
    for i in range(10):
        results.append(a * float(i))
        if i == 3:
            try:
                rows = mx.nd.ones((1000, 100))  # a large output, so the limiter waits on it
                bad = mx.nd.take(rows, mx.nd.array([0] * 999 + [10**6]), mode="raise")
            except EngineError:
                bad = "raised at push"  # the naive engine runs (and fails) at push
    for i, result in enumerate(results):
        assert result.asnumpy()[-1] == 99_999 * i
    if bad != "raised at push":
        with pytest.raises(EngineError, match="out of range"):
            bad.wait_to_read()


def test_in_flight_limit_counts_fresh_outputs_not_updates_in_place(monkeypatch):
    from mxkit.ndarray.invoke import in_flight

    counted = []
    monkeypatch.setattr(in_flight, "add", lambda eng, var, nbytes: counted.append(nbytes))
    weight = mx.nd.ones((100_000,))
    grad = mx.nd.ones((100_000,))
    counted.clear()  # the two fresh arrays above
    mx.nd.elemwise_add(weight, grad, out=weight)  # an update in place holds no new buffer
    assert counted == []
    fresh = weight + grad
    assert counted == [400_000]
    assert fresh.asnumpy()[0] == 3.0


def test_a_thread_waits_only_for_its_own_outputs_in_flight(monkeypatch):
    """Thread B's output waits on an event that thread A sets only after pushing many large outputs (as a
    dist_sync pull completes only after every worker pushed): A's bound on outputs in flight must not make
    it wait for B's output, or neither would ever go on."""
    import threading

    from mxkit.ndarray.invoke import engine, in_flight

    monkeypatch.setattr(in_flight, "limit", 300_000)
    eng = engine()
    pushed, release = threading.Event(), threading.Event()
    held = eng.new_var()

    def other_thread():
        eng.push(lambda: release.wait(30), writes=[held])  # completes once A is done
        in_flight.add(eng, held, 400_000)  # B's large output, the oldest in flight
        pushed.set()

    b = threading.Thread(target=other_thread)
    b.start()
    assert pushed.wait(30)
    a = mx.nd.array(np.arange(100_000, dtype=np.float32))
    done = []

    def this_thread_pushes():
        results = [a * float(i) for i in range(10)]  # past the bound: A waits for its own oldest outputs
        done.append(results[-1].asnumpy()[-1])
        release.set()

    runner = threading.Thread(target=this_thread_pushes)
    runner.start()
    runner.join(20)
    release.set()
    b.join(30)
    eng.wait_for_var(held)
    assert done == [99_999 * 9.0], "the pushing thread waited for another thread's output"


_IN_PLACE = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.true_divide}


@pytest.mark.parametrize("rows", [3, 700])  # 700 x 1024 float32: 2.9 MB, pushed to a worker, not run inline
def test_in_place_updates_match_a_serial_replay(engine_name, rows):
    """``a op= b`` (array or scalar, a whole array or a row view of one, an operand that is the target itself)
    mixed with fresh results that read the targets: each read sees the updates pushed before it and none after."""
    rng = np.random.default_rng(rows)
    host = [rng.uniform(0.5, 1.5, (rows, 1024)).astype(np.float32) for _ in range(3)]
    arrays = [mx.nd.array(h) for h in host]
    snapshots = []
    for step in range(40):
        symbol = list(_IN_PLACE)[step % 4]
        i, j = (int(v) for v in rng.integers(0, 3, size=2))
        kind = int(rng.integers(0, 4))
        target, expected = (arrays[i], host[i]) if kind != 3 else (arrays[i][1], host[i][1])
        operand = 1.25 if kind == 0 else arrays[j] if kind != 3 else arrays[j][2]
        expected_operand = np.float32(1.25) if kind == 0 else host[j] if kind != 3 else host[j][2].copy()
        getattr(target, {"+=": "__iadd__", "-=": "__isub__", "*=": "__imul__", "/=": "__itruediv__"}[symbol])(operand)
        _IN_PLACE[symbol](expected, expected_operand, out=expected)
        if step % 5 == 0:
            snapshots.append((arrays[j] + arrays[i], host[j] + host[i]))
    for got, want in [*zip(arrays, host), *snapshots]:
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_in_place_update_keeps_its_buffer_and_integer_semantics():
    x = mx.nd.array(np.arange(6).reshape(2, 3), dtype="int32")
    storage = x._data
    x *= 2.7  # the scalar is cast to the array's dtype first (2), as MXNet does
    x -= mx.nd.ones((2, 3), dtype="int32")
    assert x._data is storage and x.dtype == np.int32
    np.testing.assert_array_equal(x.asnumpy(), np.arange(6).reshape(2, 3) * 2 - 1)
    with pytest.raises(mx.MXKitError):
        x += mx.nd.ones((3, 2), dtype="int32")  # another shape: the general path reports it


@pytest.mark.parametrize("form", ["array", "row view"])
def test_an_in_place_update_holds_back_a_later_write_to_its_operand(engine_name, form):
    """``x += y`` waits behind a blocked write to ``x``; ``y *= 2`` pushed after it must wait for that read
    (run at once, it would change what ``x += y`` then reads)."""
    if engine_name == "naive":
        pytest.skip("the naive engine runs each push at once: a blocked write would block the test")
    import threading

    from mxkit.ndarray.invoke import push_raw

    x, y = mx.nd.ones((4, 8)), mx.nd.full((4, 8), 3.0)
    release = threading.Event()
    push_raw(lambda: release.wait(10), [], [x], x.context, "blocked write")
    target, operand = (x, y) if form == "array" else (x[1], y[1])
    target += operand
    y *= 2
    release.set()
    expected = np.ones((4, 8), np.float32)
    if form == "array":
        expected += 3
    else:
        expected[1] += 3
    np.testing.assert_array_equal(x.asnumpy(), expected)
    np.testing.assert_array_equal(y.asnumpy(), np.full((4, 8), 6.0, np.float32))
