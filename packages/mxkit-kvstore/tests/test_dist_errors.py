"""Bad uses of the distributed store fail with KVStoreErrors that say what would be right;
gradient compression runs on the workers."""

import mxkit.kvstore as kvstore
import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import KVStoreError, ShapeError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


def test_unknown_dist_types_list_the_choices():
    pytest.importorskip("ray")
    with pytest.raises(KVStoreError, match=r"unknown KVStore type 'dist_bogus'; choose one of .*dist_sync"):
        kvstore.create("dist_bogus")


def test_a_store_outside_a_job_says_how_to_join_one(ray_cluster, monkeypatch):
    monkeypatch.delenv("MXKIT_JOB_NAMESPACE", raising=False)
    monkeypatch.delenv("MXKIT_RANK", raising=False)
    with pytest.raises(KVStoreError, match="needs its rank: run the script under 'mxkit launch'"):
        kvstore.create("dist_sync")
    with pytest.raises(KVStoreError, match="needs its job's namespace"):
        kvstore.create("dist_sync", rank=0)
    with pytest.raises(KVStoreError, match="no job runs in namespace 'nowhere'"):
        kvstore.create("dist_sync", rank=0, namespace="nowhere")
    monkeypatch.setenv("MXKIT_RANK", "first")
    with pytest.raises(KVStoreError, match=r"rank must be an int >= 0, got 'first' \(from \$MXKIT_RANK\)"):
        kvstore.create("dist_sync", namespace="nowhere")


def test_bad_options_are_named(shared_job):
    job = shared_job(2, 1)
    ns = job.namespace
    with pytest.raises(KVStoreError, match=r"unknown options \['colour'\]"):
        kvstore.create("dist_sync", rank=0, namespace=ns, colour="red")
    with pytest.raises(KVStoreError, match="a dist_sync store takes no tau"):
        kvstore.create("dist_sync", rank=0, namespace=ns, tau=2)
    with pytest.raises(KVStoreError, match="needs an int tau >= 0, got -1"):
        kvstore.create("dist_ssp", rank=0, namespace=ns, tau=-1)
    with pytest.raises(KVStoreError, match=r"rank 5 is out of range: this job has 2 workers, ranks 0\.\.1"):
        kvstore.create("dist_sync", rank=5, namespace=ns)
    with pytest.raises(KVStoreError, match=r"num_workers is 3, but the job .* was started for 2 workers"):
        kvstore.create("dist_sync", rank=0, num_workers=3, namespace=ns)
    with pytest.raises(KVStoreError, match=r"rank 1 created a 'dist_async' store .* but rank 0 uses 'dist_sync'"):
        kvstore.create("dist_sync", rank=0, namespace=ns)
        kvstore.create("dist_async", rank=1, namespace=ns)


def test_bad_keys_and_shapes_are_named(shared_job, workers):
    job = shared_job(2, 1)

    def worker(kv):
        kv.init("errs", nd.zeros((2, 2)))
        with pytest.raises(KVStoreError, match="pull of key 'nokey' before init"):
            kv.pull("nokey", out=nd.zeros((2, 2)))
        with pytest.raises(KVStoreError, match="keys must be all ints or all strs"):
            kv.push(3, nd.zeros((2, 2)))
        with pytest.raises(ShapeError, match=r"push of key 'errs': an array has shape \(3,\), the key was "
                                             r"initialised with shape \(2, 2\)"):
            kv.push("errs", nd.zeros((3,)))
        with pytest.raises(KVStoreError, match="pull needs out="):
            kv.pull("errs")
        with pytest.raises(KVStoreError, match="duplicate init of key 'errs'"):
            kv.init("errs", nd.zeros((2, 2)))
        with pytest.raises(KVStoreError, match=r"optimizer states need an optimizer on the servers: call kv\.set_opt"):
            kv.save_optimizer_states("never-written")
        return True

    assert workers(job, worker) == [True, True]


def test_start_job_checks_its_arguments(ray_cluster):
    from mxkit.kvstore.dist.job import start_job

    with pytest.raises(KVStoreError, match="start_job needs num_workers >= 1"):
        start_job(0, 1)
    with pytest.raises(KVStoreError, match=r"unknown options \['replicas'\]"):
        start_job(1, 1, replicas=2)


def test_gradient_compression_runs_on_the_workers(start_job, workers):
    from mxkit.kvstore.compression import make_compressor

    job = start_job(2, 2, bigarray_bound=6)
    grads = np.random.default_rng(3).normal(size=(2, 3, 3, 4)).astype(np.float32)  # rank, step, value

    def worker(kv):
        kv.init("c", nd.zeros((3, 4)))  # 12 elements: split across both servers
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
        out, seen = nd.zeros((3, 4)), []
        for step in range(3):
            kv.push("c", nd.array(grads[kv.rank, step]))
            kv.pull("c", out=out)
            seen.append(out.asnumpy())
        return seen

    # the reference: each worker's 2-bit codes of each half (its own residual), summed
    compressor = make_compressor({"type": "2bit", "threshold": 0.5})
    residuals = np.zeros((2, 2, 6), np.float32)  # rank, half
    expected = []
    for step in range(3):
        total = np.zeros(12, np.float32)
        for rank in range(2):
            for half in range(2):
                flat = grads[rank, step].reshape(-1)[half * 6:(half + 1) * 6]
                decoded = np.zeros(6, np.float32)
                compressor.decompress(np, compressor.compress(np, flat, residuals[rank, half]), decoded, False)
                total[half * 6:(half + 1) * 6] += decoded
        expected.append(total.reshape(3, 4))
    for seen in workers(job, worker):
        for step in range(3):
            np.testing.assert_array_equal(seen[step], expected[step])
    assert {float(v) for v in np.unique(expected[0])} <= {-1.0, -0.5, 0.0, 0.5, 1.0}
