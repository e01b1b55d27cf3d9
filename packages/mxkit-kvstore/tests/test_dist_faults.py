"""Dead and uneven workers: rounds and barriers fail naming the missing rank, never hang;
workers with different numbers of batches finish the epoch at a barrier."""

import time

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import config
from mxkit.core.errors import EngineError, KVStoreError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


@pytest.mark.parametrize("overlap", [False, True])
def test_a_dead_worker_fails_the_round_and_the_barrier_naming_its_rank(start_job, workers, overlap):
    job = start_job(2, 1)
    timed_out = r"by rank 0 timed out after 1.0 s waiting for rank\(s\) \[1\]"

    def worker(kv):
        kv.init("t", nd.zeros((2,)))
        if kv.rank == 1:
            return None  # this worker dies after init
        kv.push("t", nd.ones((2,)))
        out = nd.zeros((2,))
        start = time.monotonic()
        if overlap:  # the pull is an engine operation: reading out raises its error, then the next call
            kv.pull("t", out=out)
            with pytest.raises(EngineError, match=r"kvstore\.pull.*" + timed_out):
                out.wait_to_read()
            pull_wait = time.monotonic() - start
            with pytest.raises(KVStoreError, match=timed_out):
                kv.barrier()
        else:
            with pytest.raises(KVStoreError, match=timed_out):
                kv.pull("t", out=out)
            pull_wait = time.monotonic() - start
        with pytest.raises(KVStoreError, match=r"barrier \d+ timed out after 1.0 s on rank 0: rank\(s\) \[1\] did "
                                               r"not arrive"):
            kv.barrier()
        return pull_wait

    with config.override(kvstore_overlap=overlap):
        pull_wait, _ = workers(job, worker, timeout=1.0)
    assert 1.0 <= pull_wait < 10


def test_uneven_batches_finish_the_epoch_at_the_barrier(shared_job, workers):
    # MXNet #7888: rank 0 has 5 batches this epoch, rank 1 only 3
    job = shared_job(2, 1)
    batches = [5, 3]
    grads = np.arange(2 * 6 * 2, dtype=np.float32).reshape(2, 6, 2)

    def worker(kv):
        kv.init("uneven", nd.zeros((2,)))
        out, seen = nd.zeros((2,)), []
        for step in range(batches[kv.rank]):
            kv.push("uneven", nd.array(grads[kv.rank, step]))
            kv.pull("uneven", out=out)
            seen.append(out.asnumpy())
        kv.barrier()  # the end of the epoch
        kv.push("uneven", nd.array(grads[kv.rank, 5]))
        kv.pull("uneven", out=out)
        seen.append(out.asnumpy())
        return seen

    rank0, rank1 = workers(job, worker, timeout=60)
    for step in range(3):
        np.testing.assert_array_equal(rank0[step], grads[0, step] + grads[1, step])
        np.testing.assert_array_equal(rank1[step], rank0[step])
    for step in (3, 4):  # rounds of rank 0 alone, once rank 1 waits at the barrier
        np.testing.assert_array_equal(rank0[step], grads[0, step])
    np.testing.assert_array_equal(rank0[-1], grads[0, 5] + grads[1, 5])
    np.testing.assert_array_equal(rank1[-1], rank0[-1])
