"""Trainer over a dist_sync store: two workers (threads, each with its own store client)
train exactly as one worker whose gradient is the sum of theirs (the serial replay of
test_trainer_kvstore), whether the servers or the workers run the optimizer."""

import threading

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import Trainer
from test_trainer_kvstore import DATA, LR, MOMENTUM, WD, _net, _replay

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_two_dist_sync_workers_equal_the_serial_replay(start_dist_job, update_on_kvstore):
    job = start_dist_job(2, 1)
    trained, started, errors = {}, {}, []

    def worker(rank):
        try:
            kv = mx.kv.create("dist_sync", rank=rank, num_workers=2, namespace=job.namespace, timeout=60)
            net = _net([mx.cpu(0)])
            if rank == 1:
                net.weight.set_data(mx.nd.ones((2, 3)))
            trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD,
                                                           "rescale_grad": 0.5},
                              kvstore=kv, update_on_kvstore=update_on_kvstore)
            # the store is made and seeded at the first step (as in MXNet, after that step's backward
            # pass, with the gradient scale of that step: 0.5 / 1 here); made here, every worker
            # starts from worker 0's weights
            trainer._ready()
            started[rank] = net.weight.data().asnumpy()
            for step in range(3):
                with mx.autograd.record():
                    loss = (net(mx.nd.array(DATA[step, rank:rank + 1])) ** 2).sum()
                loss.backward()
                trainer.step(1)
            trained[rank] = net.weight.data().asnumpy()
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    assert not errors, errors
    np.testing.assert_array_equal(started[1], np.full((2, 3), 0.2, np.float32))
    w, _ = _replay(3)
    np.testing.assert_allclose(trained[0], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(trained[1], trained[0])
