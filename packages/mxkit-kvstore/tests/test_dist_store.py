"""The distributed store end to end: worker threads, each with its own store and rank, on
a loopback Ray cluster; results against a serial numpy replay."""

import mxkit.ndarray as nd
import numpy as np
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


def integer_grads(seed, workers, steps, shape):
    # integer values: sums are exact in float32 whatever order the server adds them in
    return np.random.default_rng(seed).integers(-8, 8, size=(workers, steps, *shape)).astype(np.float32)


@pytest.mark.parametrize(("num_workers", "num_servers"), [(2, 1), (3, 2), (4, 3)])
def test_dist_sync_pulls_exactly_each_rounds_sum(shared_job, workers, num_workers, num_servers):
    job = shared_job(num_workers, num_servers)
    shapes = {"small": (3, 4), "big": (11, 7), 7: (5,)}  # "big" (77 elements) is split across servers
    steps = 4
    grads = {key: integer_grads(i, num_workers, steps, shape) for i, (key, shape) in enumerate(shapes.items())}

    def worker(kv):
        assert (kv.rank < num_workers, kv.num_workers, kv.num_servers, kv.type) == \
            (True, num_workers, num_servers, "dist_sync")
        kv.init(["small", "big"], [nd.zeros(shapes["small"]), nd.zeros(shapes["big"])])
        seen = []
        for step in range(steps):
            # one array per device: the worker sums its two "devices" first
            kv.push(["small", "big"], [[nd.array(grads[k][kv.rank, step] / 2), nd.array(grads[k][kv.rank, step] / 2)]
                                       for k in ("small", "big")])
            outs = [nd.zeros(shapes["small"]), nd.zeros(shapes["big"])]
            kv.pull(["small", "big"], out=outs)
            seen.append([o.asnumpy() for o in outs])
        return seen

    for seen in workers(job, worker):
        for step, (small, big) in enumerate(seen):
            np.testing.assert_array_equal(small, grads["small"][:, step].sum(axis=0))
            np.testing.assert_array_equal(big, grads["big"][:, step].sum(axis=0))


def test_big_arrays_are_split_across_every_server_and_reassembled_exactly(shared_job, workers):
    import ray

    job = shared_job(4, 3)  # big-array bound 50
    value = np.arange(1001 * 3, dtype=np.float32).reshape(1001, 3)

    def worker(kv):
        kv.init("split", nd.array(value))
        out = nd.zeros(value.shape)
        kv.pull("split", out=out)
        first = out.asnumpy()
        kv.push("split", nd.array(value * (kv.rank + 1)))
        kv.pull("split", out=out)
        return first, out.asnumpy()

    for first, summed in workers(job, worker):
        np.testing.assert_array_equal(first, value)
        np.testing.assert_array_equal(summed, value * 10)
    # each server holds one contiguous third (3003 elements: 1001 each), in order
    parts = ray.get([server.value.remote(("split", index)) for index, server in enumerate(job.servers)])
    assert [part.shape for part in parts] == [(1001,)] * 3
    np.testing.assert_array_equal(np.concatenate(parts), (value * 10).reshape(-1))


def test_pushpull_broadcast_and_string_keys(shared_job, workers):
    job = shared_job(2, 1)

    def worker(kv):
        out = nd.zeros((2, 2))
        kv.broadcast("bcast", nd.ones((2, 2)) * 7, out=out)
        first = out.asnumpy()
        grad = nd.ones((2, 2)) * (kv.rank + 1)
        kv.pushpull("bcast", grad)  # into grad itself
        return first, grad.asnumpy()

    for first, summed in workers(job, worker):
        np.testing.assert_array_equal(first, np.full((2, 2), 7))
        np.testing.assert_array_equal(summed, np.full((2, 2), 3))


@pytest.mark.parametrize(("batch", "overlap", "big"), [(False, True, 16_000), (True, True, 16_000),
                                                      (False, False, 300_000), (True, False, 300_000)])
def test_two_servers_written_at_once_match_a_serial_replay(shared_job, workers, batch, overlap, big):
    """Each call touches both servers (big keys are split across them, so their frames are
    written to both at once); push, pull and pushpull of every kind of call give the values
    of a serial numpy replay, with batched frames on and off, as engine operations or not.

    (With pulls as engine operations the big key stays under 64 KiB: this test's two workers
    are threads of one process, and ndarray bounds the bytes of outputs in flight per process,
    so one worker making a big array could wait for the other's pull, which waits for it.)
    """
    from mxkit.core import config

    job = shared_job(2, 2)  # big-array bound 50
    shapes = {"small": (3, 4), "split": (11, 7), "big": (big,), "one": (5,)}  # "big": two parts
    names = [f"{key}-{batch}-{overlap}" for key in shapes]
    steps = 3
    grads = {key: integer_grads(10 + i, 2, steps, shape) for i, (key, shape) in enumerate(shapes.items())}

    def worker(kv):
        kv.init(names, [nd.zeros(shape) for shape in shapes.values()])
        seen = []
        for step in range(steps):
            values = [nd.array(grads[key][kv.rank, step]) for key in shapes]
            outs = [nd.zeros(shape) for shape in shapes.values()]
            if step == 1:
                kv.pushpull(names, values, out=outs)
            else:
                kv.push(names, values)
                kv.pull(names, out=outs)
            big = nd.zeros(shapes["big"])  # one split key alone: a frame per server
            kv.pull(names[2], out=big)
            seen.append([out.asnumpy() for out in outs] + [big.asnumpy()])
        return seen

    with config.override(kvstore_batch=batch, kvstore_overlap=overlap):
        results = workers(job, worker)
    for seen in results:
        for step, values in enumerate(seen):
            expected = [grads[key][:, step].sum(axis=0) for key in shapes]  # a round's sum over both workers
            for got, want in zip(values, [*expected, expected[2]], strict=True):
                np.testing.assert_array_equal(got, want)


def _add_into(key, grad, weight):
    weight[:] = weight + grad


def test_eight_threads_on_one_store_match_a_serial_replay(start_job):
    """8 threads push and pull their own keys through one store: every update arrives and
    each pull sees its thread's own pushes so far, exactly as one thread making the calls
    in any interleaving would (integer values: the sums are exact)."""
    from concurrent.futures import ThreadPoolExecutor

    import mxkit.kvstore as kvstore

    job = start_job(1, 2, bigarray_bound=50, allow_remote_code=True)
    kv = kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=30.0,
                        allow_remote_code=True)
    kv.set_updater(_add_into)
    threads, steps = 8, 12
    shapes = [(3,), (4, 5), (60,), (2,), (7,), (11, 7), (1,), (5, 5)]  # some split across the servers
    grads = [np.random.default_rng(t).integers(-9, 9, size=(steps, *shapes[t])).astype(np.float32)
             for t in range(threads)]
    kv.init([f"thread{t}" for t in range(threads)], [nd.zeros(shape) for shape in shapes])

    def run(t):
        seen = []
        for step in range(steps):
            out = nd.zeros(shapes[t])
            if step % 3 == 2:
                kv.pushpull(f"thread{t}", nd.array(grads[t][step]), out=out)
            else:
                kv.push(f"thread{t}", nd.array(grads[t][step]))
                kv.pull(f"thread{t}", out=out)
            seen.append(out.asnumpy())
        return seen

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(run, range(threads)))
    for t, seen in enumerate(results):
        np.testing.assert_array_equal(np.stack(seen), np.cumsum(grads[t], axis=0))  # the serial replay


@pytest.mark.parametrize("size", [6, 300_000])  # rides along with the pull (copied) / leaves at once
def test_a_push_reads_its_value_when_pushed_not_when_sent(start_job, size):
    """Writing the pushed array after push() must not change what the servers get (MXNet's
    push reads the value then): the small push waits for the pull, the big one does not."""
    import mxkit.kvstore as kvstore

    job = start_job(1, 1)
    kv = kvstore.create("dist_sync", rank=0, num_workers=1, namespace=job.namespace, timeout=30.0)
    kv.init("w", nd.zeros((size,)))
    grad = nd.array(np.arange(size, dtype=np.float32))
    kv.push("w", grad)
    grad[:] = -1.0  # the caller reuses its buffer before the next store call
    out = nd.zeros((size,))
    kv.pull("w", out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.arange(size, dtype=np.float32))
