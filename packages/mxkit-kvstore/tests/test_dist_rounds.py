"""A server's rounds (ShardTable) without Ray: worker threads against one table."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.consistency import make_model
from mxkit.kvstore.dist.rounds import ShardTable

SID = ("w", 0)


def table(model, workers, value=None, **options):
    t = ShardTable(workers)
    t.model = make_model(model, num_workers=workers, **options)
    t.init([(SID, np.zeros(3, np.float32) if value is None else value)])
    return t


def add_updater(key, merged, value, contributors):
    return value + merged


def run(workers, fn):
    with ThreadPoolExecutor(workers) as pool:
        return [f.result(timeout=30) for f in [pool.submit(fn, rank) for rank in range(workers)]]


def test_sequential_pull_sees_exactly_the_round_after_it():
    t = table("sequential", 3)
    rng = np.random.default_rng(0)
    grads = rng.integers(-5, 5, size=(3, 6, 3)).astype(np.float32)  # rank, round, value

    def worker(rank):
        seen = []
        for step in range(6):
            # out-of-order arrival is allowed: the round number travels with the push
            t.push(rank, 0, [(SID, step, grads[rank, step])])
            values, _ = t.pull(rank, 0, [(SID, step + 1)], timeout=10)
            seen.append(values[0])
        return seen

    for seen in run(3, worker):
        for step, value in enumerate(seen):
            np.testing.assert_array_equal(value, grads[:, step].sum(axis=0))


def test_rounds_arriving_out_of_order_still_apply_in_order():
    t = table("sequential", 2)
    t.apply = lambda key, merged, value, contributors: value * 10 + merged
    t.push(0, 0, [(SID, 1, np.full(3, 2, np.float32))])
    t.push(1, 0, [(SID, 1, np.full(3, 2, np.float32))])
    assert t.rounds(SID)[1] == [0, 0]  # round 1 waits for round 0
    t.push(0, 0, [(SID, 0, np.ones(3, np.float32))])
    t.push(1, 0, [(SID, 0, np.ones(3, np.float32))])
    values, _ = t.pull(0, 0, [(SID, 2)], timeout=1)
    np.testing.assert_array_equal(values[0], np.full(3, (0 * 10 + 2) * 10 + 4))


def test_eventual_applies_every_push_exactly_once():
    t = table("eventual", 4)
    t.apply = add_updater
    counts = [37, 5, 20, 11]

    def worker(rank):
        for step in range(counts[rank]):
            t.push(rank, 0, [(SID, step, np.ones(3, np.float32))])

    run(4, worker)
    values, _ = t.pull(0, 0, [(SID, counts[0])], timeout=1)
    np.testing.assert_array_equal(values[0], np.full(3, sum(counts)))
    assert t.rounds(SID) == (counts, counts)


@pytest.mark.parametrize("tau", [0, 1, 2])
def test_bounded_delay_never_reads_more_than_tau_rounds_stale(tau):
    t = table("bounded_delay", 3, tau=tau)
    t.apply = add_updater
    staleness = []

    def worker(rank):
        for step in range(12):
            time.sleep(0.001 * rank)  # rank 2 is the slowest
            t.push(rank, 0, [(SID, step, np.eye(3, dtype=np.float32)[rank])])  # counts pushes per rank
            values, clocks = t.pull(rank, 0, [(SID, step + 1)], timeout=10)
            merged = values[0]
            assert merged[rank] == step + 1 and step + 1 - merged.min() <= tau  # the data's own clock
            worker_round, slowest = clocks[0]
            staleness.append(worker_round - slowest)

    run(3, worker)
    assert max(staleness) <= tau
    assert len(staleness) == 36


def test_a_pull_waiting_for_a_dead_worker_names_its_rank():
    t = table("sequential", 3)
    t.push(0, 0, [(SID, 0, np.ones(3, np.float32))])
    t.push(2, 0, [(SID, 0, np.ones(3, np.float32))])
    start = time.monotonic()
    with pytest.raises(KVStoreError, match=r"timed out after 0.2 s waiting for rank\(s\) \[1\]"):
        t.pull(0, 0, [(SID, 1)], timeout=0.2)
    assert time.monotonic() - start < 2


def test_workers_with_uneven_batches_finish_the_epoch():
    # rank 0 has 5 batches, rank 1 only 3 (MXNet #7888): rank 1 ends the epoch and the
    # later rounds complete with rank 0 alone
    t = table("sequential", 2)
    t.apply = add_updater

    barrier = threading.Barrier(2)

    def with_barrier(rank):
        batches = 5 if rank == 0 else 3
        for step in range(batches):
            t.push(rank, 0, [(SID, step, np.full(3, rank + 1, np.float32))])
            t.pull(rank, 0, [(SID, step + 1)], timeout=10)
        t.end_epoch(rank, 0, {"w": batches})
        barrier.wait(timeout=10)  # the coordinator's barrier
        t.push(rank, 1, [(SID, 0, np.full(3, 10, np.float32))])
        return t.pull(rank, 1, [(SID, 1)], timeout=10)[0][0]

    first, second = run(2, with_barrier)
    expected = 3 * 3 + 2 * 1 + 20  # 3 rounds of both, 2 of rank 0 alone, one of both
    np.testing.assert_array_equal(first, np.full(3, expected))
    np.testing.assert_array_equal(second, first)
    assert t.rounds(SID) == ([6, 6], [6, 6])


def test_starting_an_epoch_before_every_worker_ended_the_last_is_an_error():
    t = table("sequential", 2)
    t.end_epoch(0, 0, {})
    with pytest.raises(KVStoreError, match=r"ranks \[1\] have not ended epoch 0"):
        t.push(0, 1, [(SID, 0, np.ones(3, np.float32))])


def test_protocol_errors_are_named():
    t = table("sequential", 2)
    with pytest.raises(KVStoreError, match=r"rank 2 is out of range; this job's workers are 0\.\.1"):
        t.push(2, 0, [(SID, 0, np.ones(3, np.float32))])
    with pytest.raises(KVStoreError, match="push of key 'b' before init"):
        t.push(0, 0, [(("b", 0), 0, np.ones(3, np.float32))])
    with pytest.raises(KVStoreError, match=r"a value of shape \(2,\) for a part of shape \(3,\)"):
        t.push(0, 0, [(SID, 0, np.ones(2, np.float32))])
    t.push(0, 0, [(SID, 0, np.ones(3, np.float32))])
    with pytest.raises(KVStoreError, match="pushed round 0 of key 'w' twice"):
        t.push(0, 0, [(SID, 0, np.ones(3, np.float32))])
    with pytest.raises(KVStoreError, match="duplicate init of key 'w'"):
        t.init([(SID, np.zeros(3))])


class _CountingCondition(threading.Condition):
    def __init__(self):
        super().__init__()
        self.notified = 0

    def notify_all(self):
        self.notified += 1
        super().notify_all()


@pytest.mark.parametrize("batched", [False, True])
def test_only_a_push_that_changes_what_pulls_read_wakes_them(batched):
    """In a synchronous round the early pushes are merged and wait for the others: they change nothing a
    waiting pull reads, so they wake no one; the push that completes the round wakes the waiting pulls,
    which then read it (per-key pushes and a batch's merged push alike)."""
    from mxkit.kvstore.dist import batches

    workers = 4
    t = table("sequential", workers)
    t.condition = _CountingCondition()
    batch = batches.define(t, [list(SID)]) if batched else None

    def push(rank, round_index):
        value = np.full(3, rank + 1, np.float32)
        if batched:
            batches.push(t, rank, 0, batch, np.array([round_index]), value, False)
        else:
            t.push(rank, 0, [(SID, round_index, value)])

    answers = {}
    waiting = []
    for rank in range(workers - 1):
        push(rank, 0)
        thread = threading.Thread(target=lambda r=rank: answers.setdefault(r, t.pull(r, 0, [(SID, 1)], timeout=10)))
        thread.start()
        waiting.append(thread)
    time.sleep(0.05)
    assert t.condition.notified == 0 and not answers  # three merges, no futile wake-ups
    push(workers - 1, 0)
    for thread in waiting:
        thread.join(10)
    assert t.condition.notified == 1
    for rank in range(workers - 1):
        np.testing.assert_array_equal(answers[rank][0][0], np.full(3, 1 + 2 + 3 + 4))
