"""One worker of benchmarks/kvstore_dist.py, for mxkit or for MXNet 1.x (the same code runs on both).

    python _dist_worker.py {mxkit|mxnet} comm '{"iters": 100}'
    python _dist_worker.py {mxkit|mxnet} train '{"kvstore": "dist_sync", "epochs": 4}'

The store joins its job from the environment (``MXKIT_*`` under mxkit, ``DMLC_*`` under
MXNet). Rank 0 prints ``RESULT <json>``; every rank runs the same steps (a distributed store
needs all of them).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

#: value sizes of the throughput rows (bytes)
THROUGHPUT_SIZES = (4 * 2**20, 64 * 2**20)
#: the "model" of the batched row: this many keys of KEY_FLOATS float32 each
MODEL_KEYS = 100
KEY_FLOATS = 256


def framework(name: str):
    if name == "mxnet":
        import mxnet as mx
    else:
        from mxkit import mx
    return mx


def barrier(kv) -> None:
    (getattr(kv, "barrier", None) or kv._barrier)()


def seconds_per_round(kv, keys, values, outs, iters: int) -> float:
    """Best-of-3 seconds of one push+pull of ``keys`` (after two warm-up rounds)."""
    for _ in range(2):
        kv.push(keys, values)
        kv.pull(keys, out=outs)
    for out in outs if isinstance(outs, list) else [outs]:
        out.wait_to_read()
    best = float("inf")
    for _ in range(3):
        barrier(kv)
        start = time.perf_counter()
        for _ in range(iters):
            kv.push(keys, values)
            kv.pull(keys, out=outs)
        for out in outs if isinstance(outs, list) else [outs]:
            out.wait_to_read()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def communication(mx, kv, params: dict) -> dict:
    """Push+pull latency of a 4-byte key, of a 100-key model, and throughput of big values."""
    iters = int(params.get("iters", 50))
    result = {}
    kv.init(0, mx.nd.zeros((1,)))
    result["tiny_ms"] = seconds_per_round(kv, 0, mx.nd.ones((1,)), mx.nd.zeros((1,)), iters) * 1e3
    keys = list(range(10, 10 + MODEL_KEYS))
    kv.init(keys, [mx.nd.zeros((KEY_FLOATS,)) for _ in keys])
    values = [mx.nd.ones((KEY_FLOATS,)) for _ in keys]
    outs = [mx.nd.zeros((KEY_FLOATS,)) for _ in keys]
    # as many rounds as the 1-key row: their ratio compares like with like (a handful of
    # rounds measures mostly how long the first answer takes)
    result["model_ms"] = seconds_per_round(kv, keys, values, outs, iters) * 1e3
    for index, size in enumerate(THROUGHPUT_SIZES):
        key = 1000 + index
        floats = size // 4
        kv.init(key, mx.nd.zeros((floats,)))
        rounds = 3 if size >= 2**26 else 10
        seconds = seconds_per_round(kv, key, mx.nd.ones((floats,)), mx.nd.zeros((floats,)), rounds)
        result[f"gbps_{size}"] = 2 * size / seconds / 1e9  # pushed and pulled bytes of one worker
    return result


def dataset(num_workers: int, rank: int):
    """A fixed 10-class problem (Gaussian blobs in 64-D): this worker's shard and a validation set."""
    rng = np.random.default_rng(7)
    centres = rng.normal(0, 1.0, (10, 64))
    labels = rng.integers(0, 10, 6144)
    data = (centres[labels] + rng.normal(0, 3.2, (len(labels), 64))).astype(np.float32)
    train, val = slice(0, 4096), slice(4096, None)
    shard = 4096 // num_workers
    part = slice(rank * shard, (rank + 1) * shard)
    return data[train][part], labels[train][part].astype(np.float32), data[val], labels[val].astype(np.float32)


def training(mx, kv, params: dict) -> dict:
    """Train an MLP with a Module on this worker's shard; samples/s and accuracy after each epoch."""
    mx.random.seed(1)
    np.random.seed(1)
    x, y, val_x, val_y = dataset(kv.num_workers, kv.rank)
    batch = int(params.get("batch", 64))
    net = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(net, num_hidden=128, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    train_iter = mx.io.NDArrayIter(x, y, batch, shuffle=False, label_name="softmax_label")
    val_iter = mx.io.NDArrayIter(val_x, val_y, 256, label_name="softmax_label")
    module = mx.mod.Module(net, context=mx.cpu())
    module.bind(data_shapes=train_iter.provide_data, label_shapes=train_iter.provide_label)
    module.init_params(mx.init.Xavier(), force_init=True)
    module.init_optimizer(kvstore=kv, optimizer="sgd",
                          optimizer_params={"learning_rate": float(params.get("lr", 0.1)), "momentum": 0.9})
    curve = []
    samples = 0
    barrier(kv)
    start = time.perf_counter()
    for _ in range(int(params.get("epochs", 3))):
        train_iter.reset()
        for data_batch in train_iter:
            module.forward(data_batch, is_train=True)
            module.backward()
            module.update()
            samples += batch
        # both engines run the steps asynchronously: the epoch ends when its updates are done,
        # not when the loop has queued them (scoring would otherwise pay for the backlog)
        mx.nd.waitall()
        scoring = time.perf_counter()
        accuracy = dict(module.score(val_iter, "acc"))["accuracy"]
        val_iter.reset()
        curve.append((scoring - start, accuracy))
        start += time.perf_counter() - scoring  # scoring is not training time
    barrier(kv)
    # every worker trains on as many samples as rank 0: the job's throughput, over the whole run
    # and after the first epoch (which also pays each framework's warm-up: oneDNN generating its
    # kernels, mxkit timing them against its own, first connections)
    result = {"whole_samples_per_s": samples * kv.num_workers / curve[-1][0], "curve": curve}
    epochs = len(curve)
    result["samples_per_s"] = (samples * kv.num_workers * (epochs - 1) / epochs / (curve[-1][0] - curve[0][0])
                               if epochs > 1 else result["whole_samples_per_s"])
    return result


def main() -> None:
    name, task, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3] if len(sys.argv) > 3 else "{}")
    mx = framework(name)
    kv = mx.kv.create(params.get("kvstore", "dist_sync"), **params.get("kv_options", {}))
    result = communication(mx, kv, params) if task == "comm" else training(mx, kv, params)
    if kv.rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    barrier(kv)


if __name__ == "__main__":
    main()
