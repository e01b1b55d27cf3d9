"""dist_async and dist_ssp end to end: every push applied once; no pull more than tau rounds stale.

Each rank pushes a one-hot vector (1 at its own rank) per step and the servers run MXNet's
``test`` optimizer (``w += grad``), so a pulled value counts, per rank, the pushes merged
into it: an independent clock to check the staleness bound against.
"""

import time

import mxkit.ndarray as nd
import numpy as np
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]
optimizer = pytest.importorskip("mxkit.train.optimizer", reason="server-side optimizers need mxkit-train")


def one_hot(rank, workers, size):
    value = np.zeros((workers, size), np.float32)
    value[rank] = 1
    return nd.array(value)


def test_dist_async_applies_every_push_exactly_once(start_job, workers):
    job = start_job(3, 2, bigarray_bound=8)
    counts = [23, 9, 15]

    def worker(kv):
        assert kv.type == "dist_async"
        kv.init(["split", "small"], [nd.zeros((3, 4)), nd.zeros((3, 1))])  # 12 elements: split in two
        kv.set_optimizer(optimizer.create("test", rescale_grad=1.0))
        for _ in range(counts[kv.rank]):
            kv.push(["split", "small"], [one_hot(kv.rank, 3, 4), one_hot(kv.rank, 3, 1)])
        kv.barrier()  # every push has arrived
        outs = [nd.zeros((3, 4)), nd.zeros((3, 1))]
        kv.pull(["split", "small"], out=outs)
        return [o.asnumpy() for o in outs]

    for split, small in workers(job, worker, kind="dist_async"):
        np.testing.assert_array_equal(split, np.repeat(np.array(counts, np.float32)[:, None], 4, axis=1))
        np.testing.assert_array_equal(small[:, 0], counts)


def test_dist_ssp_never_reads_a_value_more_than_tau_rounds_stale(start_job, workers):
    tau, steps = 1, 10
    job = start_job(3, 1)

    def worker(kv):
        assert kv.type == "dist_ssp" and kv.consistency_model.tau == tau
        kv.init("w", nd.zeros((3, 1)))
        kv.set_optimizer(optimizer.create("test", rescale_grad=1.0))
        out = nd.zeros((3, 1))
        lags = []
        for step in range(steps):
            time.sleep(0.004 * kv.rank)  # rank 2 is the slowest
            kv.push("w", one_hot(kv.rank, 3, 1))
            kv.pull("w", out=out)
            merged = out.asnumpy()[:, 0]  # pushes of each rank merged into what this rank read
            assert merged[kv.rank] == step + 1  # its own push is in
            lags.append((step + 1) - merged.min())
            (_, worker_round, slowest), = kv.last_pull_clocks
            assert worker_round - slowest <= tau
        return lags

    lags = workers(job, worker, kind="dist_ssp", tau=tau)
    assert max(max(rank_lags) for rank_lags in lags) <= tau
