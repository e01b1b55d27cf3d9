"""KVStore push+pull throughput: GB/s of gradient reduced, 4 devices, keys of 4 KiB, 4 MiB, 64 MiB.

One step pushes, for every key, one float32 gradient from each of the devices ``cpu(0)``
... ``cpu(3)`` (summed into the store) and pulls the result back into one array per
device. Throughput counts the gradient bytes reduced: devices x key bytes x keys per step.
Keys are pushed and pulled as one list per call (as ``Module`` does with many small
parameters); the 4 KiB case has 256 keys, 4 MiB 4 keys, 64 MiB one.

Rows:

- **numpy sum**: ``np.add(g0, g1, out=s); np.add(s, g2, out=s); np.add(s, g3, out=s)`` per
  key, the summation alone (the speed limit of the reduction);
- **numpy sum+copies**: the same plus copying the sum into four per-device arrays, which is
  all the work of a push and a pull done by hand;
- **mxkit local / device**: ``kv.push(keys, grads); kv.pull(keys, out=outs)``, synced once per
  timed block with ``mx.nd.waitall()``;
- **mxkit / MXNet local pushpull**: ``kv.pushpull(keys, grads, out=outs)`` (mxkit writes the
  targets in the sum's own engine operation);
- **MXNet 1.9.1 local / device** in a subprocess of the interpreter named by
  ``MXKIT_BENCH_MXNET_PYTHON`` (or ``--mxnet-python``); empty without it. (PyTorch has no
  KVStore, so it has no column.)

Each number is the best of ``--repeats`` timed blocks; the in-process rows alternate blocks
so a neighbour's load hits them alike. Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python python benchmarks/kvstore.py
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import run_anchor, time_interleaved

DEVICES = 4
#: (label, float32 elements per key, keys)
CASES = [("4 KiB", 1024, 256), ("4 MiB", 1 << 20, 4), ("64 MiB", 16 << 20, 1)]
BLOCK_BYTES = 1 << 28  # gradient bytes per timed block (at least two steps)


def _steps(elements: int, keys: int) -> int:
    return max(2, BLOCK_BYTES // (DEVICES * 4 * elements * keys))


def _reduced_bytes(elements: int, keys: int) -> int:
    return DEVICES * 4 * elements * keys


def _no_sync() -> None:
    pass


def in_process(elements: int, keys: int, repeats: int) -> dict:
    """GB/s of the numpy and mxkit rows for one case."""
    from mxkit import mx

    rng = np.random.default_rng(0)
    host = [[rng.standard_normal(elements, dtype=np.float32) for _ in range(DEVICES)] for _ in range(keys)]
    sums = [np.empty(elements, np.float32) for _ in range(keys)]
    copies = [[np.empty(elements, np.float32) for _ in range(DEVICES)] for _ in range(keys)]

    def numpy_sum() -> None:
        for grads, total in zip(host, sums):
            np.add(grads[0], grads[1], out=total)
            for grad in grads[2:]:
                np.add(total, grad, out=total)

    def numpy_sum_and_copies() -> None:
        numpy_sum()
        for total, outs in zip(sums, copies):
            for out in outs:
                np.copyto(out, total)

    names = list(range(keys))
    grads = [[mx.nd.array(host[k][d], ctx=mx.cpu(d)) for d in range(DEVICES)] for k in range(keys)]
    outs = [[mx.nd.zeros(elements, ctx=mx.cpu(d)) for d in range(DEVICES)] for _ in range(keys)]
    stores = {}
    for kind in ("local", "device"):
        kv = mx.kv.create(kind)
        kv.init(names, [mx.nd.zeros(elements) for _ in names])
        stores[kind] = kv

    def push_pull(kv):
        def step() -> None:
            kv.push(names, grads)
            kv.pull(names, out=outs)

        return step

    def pushpull(kv):
        def step() -> None:
            kv.pushpull(names, grads, out=outs)

        return step

    setups = {
        "numpy sum": (numpy_sum, _no_sync),
        "numpy sum+copies": (numpy_sum_and_copies, _no_sync),
        "mxkit local": (push_pull(stores["local"]), mx.nd.waitall),
        "mxkit device": (push_pull(stores["device"]), mx.nd.waitall),
        "mxkit local pushpull": (pushpull(stores["local"]), mx.nd.waitall),
    }
    seconds = time_interleaved(setups, _steps(elements, keys), repeats, warmup=1)
    # the store computed the sum: check it once, so a fast wrong answer cannot pass
    expected = np.add(np.add(np.add(host[0][0], host[0][1]), host[0][2]), host[0][3])
    np.testing.assert_allclose(outs[0][DEVICES - 1].asnumpy(), expected, rtol=1e-5, atol=1e-5)
    return {name: _reduced_bytes(elements, keys) / s / 1e9 for name, s in seconds.items()}


MXNET_SCRIPT = r"""
import json, sys, time
import numpy as np
import mxnet as mx
cases, repeats, devices, block_bytes = json.loads(sys.argv[1])
result = {}
for label, elements, keys in cases:
    rng = np.random.default_rng(0)
    names = list(range(keys))
    grads = [[mx.nd.array(rng.standard_normal(elements, dtype=np.float32), ctx=mx.cpu(d)) for d in range(devices)]
             for _ in names]
    outs = [[mx.nd.zeros(elements, ctx=mx.cpu(d)) for d in range(devices)] for _ in names]
    steps = max(2, block_bytes // (devices * 4 * elements * keys))
    for kind in ("local", "device"):
        kv = mx.kv.create(kind)
        kv.init(names, [mx.nd.zeros(elements) for _ in names])
        kv.push(names, grads); kv.pull(names, out=outs); mx.nd.waitall()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                kv.push(names, grads)
                kv.pull(names, out=outs)
            mx.nd.waitall()
            best = min(best, (time.perf_counter() - start) / steps)
        result[f"{label}|MXNet {kind}"] = devices * 4 * elements * keys / best / 1e9
        if kind == "local":
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(steps):
                    kv.pushpull(names, grads, out=outs)
                mx.nd.waitall()
                best = min(best, (time.perf_counter() - start) / steps)
            result[f"{label}|MXNet local pushpull"] = devices * 4 * elements * keys / best / 1e9
print("RESULT " + json.dumps(result))
"""


def mxnet_rates(interpreter: str | None, repeats: int) -> dict:
    """GB/s of MXNet 1.9.1's local and device stores per case (empty without an interpreter)."""
    return run_anchor(interpreter, MXNET_SCRIPT, [CASES, repeats, DEVICES, BLOCK_BYTES])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per row (best reported)")
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"),
                        help="interpreter with MXNet 1.9.1 (default: $MXKIT_BENCH_MXNET_PYTHON)")
    args = parser.parse_args()
    mxnet = mxnet_rates(args.mxnet_python, args.repeats)
    columns = ["numpy sum", "numpy sum+copies", "mxkit local", "mxkit device", "mxkit local pushpull",
               "MXNet local", "MXNet device", "MXNet local pushpull"]

    def cell(value, width=10, digits=2):
        return f"{value:>{width}.{digits}f}" if value else f"{'-':>{width}}"

    print(f"push+pull, GB/s of gradient reduced ({DEVICES} devices, float32; best of {args.repeats}); "
          f"{os.cpu_count()} CPUs; numpy {np.__version__}")
    ratios = [("local/np sum", "mxkit local", "numpy sum"), ("device/np sum", "mxkit device", "numpy sum"),
              ("pushpull/np sum", "mxkit local pushpull", "numpy sum"),
              ("local/np+cp", "mxkit local", "numpy sum+copies"), ("local/MXNet", "mxkit local", "MXNet local"),
              ("device/MXNet", "mxkit device", "MXNet device"),
              ("pushpull/MXNet", "mxkit local pushpull", "MXNet local pushpull")]
    print(f"{'key':<8}{'keys':>5}" + "".join(f"{c:>21}" for c in columns)
          + "".join(f"{title:>16}" for title, _, _ in ratios))
    for label, elements, keys in CASES:
        rates = in_process(elements, keys, args.repeats)
        rates.update({name.split("|")[1]: v for name, v in mxnet.items() if name.startswith(label + "|")})
        row = f"{label:<8}{keys:>5}" + "".join(cell(rates.get(c), 21) for c in columns)
        for _, a, b in ratios:
            row += cell(rates[a] / rates[b], 16) if rates.get(a) and rates.get(b) else f"{'-':>16}"
        print(row, flush=True)
    if not mxnet:
        print("(MXKIT_BENCH_MXNET_PYTHON not set or MXNet failed: its columns are empty)")


if __name__ == "__main__":
    main()
