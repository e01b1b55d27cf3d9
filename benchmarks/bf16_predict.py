"""Prediction in bfloat16 against float32 on the CPU: mxkit (``mx.contrib.amp.convert_model(...,
target_dtype="bfloat16")``, run by mxkit-onednn's bfloat16 kernels) next to MXNet 1.9.1's own bfloat16 AMP.

ResNet-50 v1 (the zoo graph, benchmarks/zoo) bound with ``Module`` for prediction at batch 32, the
model converted with ``cast_optional_params=True`` (weights stored in bfloat16; BatchNorm's
parameters and statistics float32). Each (framework, dtype) runs in its own process: one warm-up batch,
then ``--repeats`` timed batches (the best counts: the machine may be shared), then the peak RSS
(``getrusage``). The last column is the largest difference of the bfloat16 logits from the float32 ones of
the same weights and data (He-normal filters drawn by numpy, one seed), relative to the largest float32
logit.

- **mxkit**: this interpreter (mxkit-onednn as installed; without bfloat16 primitives on the CPU the
  bfloat16 calls run through float32 kernels, which the row then measures).
- **MXNet 1.9.1**: the same code in the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON``, its MKLDNN
  subgraph backend off (``MXNET_SUBGRAPH_BACKEND=NONE``, as in benchmarks/memory_real.py) or on
  (``--mxnet-subgraph``, MXNet's default).

    MXKIT_BENCH_MXNET_PYTHON=... python benchmarks/bf16_predict.py

Nothing here asserts on time or memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo"
NETWORKS = {"resnet50_v1": 224, "vgg16": 224, "inceptionv3": 299}

WORKER = r'''
import json, resource, sys, time
import numpy as np
job = json.loads(sys.argv[1])
if job["framework"] == "mxnet":
    import mxnet as mx
    from mxnet.contrib import amp
else:
    from mxkit import mx
    amp = mx.contrib.amp
net = mx.sym.load(job["graph"])
batch, size = job["batch"], job["size"]
rng = np.random.default_rng(0)
data = mx.nd.array(rng.standard_normal((batch, 3, size, size)).astype(np.float32))
# the same weights in every process and framework: He-normal filters, zero biases and means, unit scales
arg_shapes, _, aux_shapes = net.infer_shape(data=data.shape)
def value(name, shape):
    if name.endswith(("gamma", "var")):
        return np.ones(shape, np.float32)
    if name.endswith(("beta", "bias", "mean")):
        return np.zeros(shape, np.float32)
    return (rng.standard_normal(shape) * np.sqrt(2 / np.prod(shape[1:]))).astype(np.float32)
args = {n: mx.nd.array(value(n, s)) for n, s in zip(net.list_arguments(), arg_shapes) if n != "data"}
aux = {n: mx.nd.array(value(n, s)) for n, s in zip(net.list_auxiliary_states(), aux_shapes)}
if job["dtype"] == "bfloat16":
    net, args, aux = amp.convert_model(net, args, aux, target_dtype="bfloat16", cast_optional_params=True)
mod = mx.mod.Module(net, data_names=["data"], label_names=None, context=mx.cpu())
mod.bind(data_shapes=[("data", data.shape)], for_training=False)
mod.set_params(args, aux)
del args, aux
batch_data = mx.io.DataBatch([data])
def predict():
    mod.forward(batch_data, is_train=False)
    return mod.get_outputs()[0].asnumpy().astype(np.float32)
logits = predict()
np.save(job["logits"], logits)
times = []
for _ in range(job["repeats"]):
    start = time.perf_counter()
    predict()
    times.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"seconds": min(times), "peak_rss_mb": peak}))
'''


def run_worker(python: str, job: dict, env: dict, timeout: int = 1800) -> dict | None:
    try:
        done = subprocess.run([python, "-c", WORKER, json.dumps(job)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        print(f"{job['framework']} {job['dtype']}: timed out", file=sys.stderr)
        return None
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"{job['framework']} {job['dtype']} failed:\n{done.stderr[-1500:]}", file=sys.stderr)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="resnet50_v1", choices=list(NETWORKS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="timed batches per run (best reported)")
    parser.add_argument("--mxnet-subgraph", action="store_true", help="MXNet with its MKLDNN subgraph backend")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every row, alternating (best reported)")
    args = parser.parse_args()
    mxnet = os.environ.get("MXKIT_BENCH_MXNET_PYTHON")
    mxnet_env = {} if args.mxnet_subgraph else {"MXNET_SUBGRAPH_BACKEND": "NONE"}
    rows = [("mxkit+oneDNN", sys.executable, "mxkit", {}), ("MXNet 1.9.1", mxnet, "mxnet", mxnet_env)]
    best: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for name, python, framework, env in rows:
                for dtype in ("float32", "bfloat16"):
                    if not python:
                        continue
                    logits = Path(folder) / f"{framework}-{dtype}.npy"
                    job = {"framework": framework, "dtype": dtype, "batch": args.batch, "repeats": args.repeats,
                           "size": NETWORKS[args.network], "graph": str(ZOO / f"{args.network}-symbol.json"),
                           "logits": str(logits)}
                    result = run_worker(python, job, env)
                    if result is None:
                        continue
                    reference = Path(folder) / f"{framework}-float32.npy"
                    result["error"] = None
                    if dtype == "bfloat16" and reference.is_file():
                        import numpy as np

                        got, expected = np.load(logits), np.load(reference)
                        result["error"] = float(np.abs(got - expected).max() / np.abs(expected).max())
                    if (name, dtype) not in best or result["seconds"] < best[(name, dtype)]["seconds"]:
                        best[(name, dtype)] = result
    print(f"{args.network} predict, batch {args.batch}: best of {args.repeats} batches x {args.rounds} rounds; "
          f"{os.cpu_count()} CPUs; each run a fresh process")
    print(f"{'':<14}{'dtype':<10}{'s/batch':>9}{'peak RSS MB':>13}{'vs float32':>12}{'max |err|/max|y|':>18}")
    for name, *_ in rows:
        base = best.get((name, "float32"))
        for dtype in ("float32", "bfloat16"):
            result = best.get((name, dtype))
            if result is None:
                print(f"{name:<14}{dtype:<10}{'-':>9}")
                continue
            speed = f"{base['seconds'] / result['seconds']:.2f}x" if base else "-"
            error = "-" if result["error"] is None else f"{result['error']:.2e}"
            print(f"{name:<14}{dtype:<10}{result['seconds']:>9.2f}{result['peak_rss_mb']:>13.0f}{speed:>12}"
                  f"{error:>18}", flush=True)


if __name__ == "__main__":
    main()
