"""The distributed KVStore on loopback: mxkit on Ray next to MXNet 1.x's ps-lite, in one run.

Rows (each worker a separate process, as in a real job; everything on 127.0.0.1):

- push+pull latency of a 4-byte key, and of a 100-key model (one call with 100 keys of 1 KiB),
  with 2 workers and 1-2 servers;
- push+pull throughput of 4 MiB and 64 MiB values (bytes pushed and pulled per worker per second);
- training-step throughput of an MLP (Module, SGD with momentum) with 1, 2 and 4 workers and
  1 and 2 servers for ``dist_sync`` and ``dist_async``, and ``dist_ssp`` (tau 1, 2, 4, 8), and
  the validation accuracy after each epoch against wall time: the time-to-accuracy table
  across staleness values (MXNet's accuracies beside mxkit's). Samples/s are counted after the
  first epoch, whose time also holds each framework's warm-up (a job of a few hundred steps is
  mostly warm-up); the ``whole`` column compares whole runs. ``--workers``, ``--servers`` and ``--kinds`` pick rows.

mxkit's jobs run on a local Ray instance started here (servers as Ray actors); MXNet's on a
ps-lite scheduler and servers started with ``DMLC_*`` variables, in the interpreter named by
``MXKIT_BENCH_MXNET_PYTHON`` (its columns are left empty without it). Ratios are mxkit over
MXNet for throughput (above 1 is better) and mxkit's time over MXNet's for latency (below 1 is
better). Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python python benchmarks/kvstore_dist.py [--quick]
        [--skip-comm] [--skip-training] [--workers 2,4] [--servers 1,2] [--kinds dist_sync] [--repeat 3]
        [--epochs 12]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

WORKER = str(Path(__file__).with_name("_dist_worker.py"))


def run_workers(commands: list[tuple[list[str], dict[str, str]]], helpers: list[tuple[list[str], dict[str, str]]],
                timeout: float = 600) -> dict:
    """Run worker processes (and helper processes that live as long as they do); rank 0's RESULT."""
    background = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for cmd, env in helpers]
    workers = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for cmd, env in commands]
    result: dict = {}
    try:
        for process in workers:
            out, err = process.communicate(timeout=timeout)
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    result = json.loads(line[len("RESULT "):])
            if process.returncode != 0:
                print(f"a worker failed ({process.returncode}):\n{err[-3000:]}", file=sys.stderr)
    finally:
        for process in workers + background:
            if process.poll() is None:
                process.kill()
            process.wait()
    return result


class MxkitJobs:
    """Jobs of mxkit's distributed store on one local Ray instance."""

    def __init__(self) -> None:
        from mxkit.kvstore.dist import job, runtime

        self._job, self._runtime = job, runtime
        started = time.perf_counter()
        self.address = runtime.init_ray(None)
        self.startup_seconds = time.perf_counter() - started

    def run(self, task: str, params: dict, workers: int, servers: int) -> dict:
        from mxkit.mx.launch import worker_environments

        job = self._job.start_job(workers, servers)
        try:
            envs = worker_environments(dict(os.environ), self._runtime.worker_environment(), job.env(), workers,
                                       os.cpu_count())
            return run_workers([([sys.executable, WORKER, "mxkit", task, json.dumps(params)], env) for env in envs], [])
        finally:
            job.stop()

    def close(self) -> None:
        self._runtime.shutdown_ray()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class MXNetJobs:
    """Jobs of MXNet 1.x's own distributed store (ps-lite over ZeroMQ) on loopback."""

    def __init__(self, python: str):
        self.python = python

    def run(self, task: str, params: dict, workers: int, servers: int) -> dict:
        env = {**os.environ, "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(_free_port()),
               "DMLC_NUM_SERVER": str(servers), "DMLC_NUM_WORKER": str(workers), "DMLC_NODE_HOST": "127.0.0.1",
               "DMLC_INTERFACE": "lo", "OMP_NUM_THREADS": "1"}
        params = {key: value for key, value in params.items() if key != "kv_options"}
        idle = [self.python, "-c", "import mxnet"]  # scheduler and servers run inside the import
        helpers = [(idle, {**env, "DMLC_ROLE": "scheduler"})] + [(idle, {**env, "DMLC_ROLE": "server"})] * servers
        worker = [self.python, WORKER, "mxnet", task, json.dumps(params)]
        return run_workers([(worker, {**env, "DMLC_ROLE": "worker"})] * workers, helpers)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return fmt.format(value) if value is not None else "-"


def communication_table(mxkit: MxkitJobs, mxnet: MXNetJobs | None, iters: int) -> None:
    print("\npush+pull on loopback, 2 workers (latency ms: lower is better; throughput GB/s per worker)")
    print(f"{'row':<34}{'servers':>8}{'mxkit':>10}{'MXNet':>10}{'mxkit/MXNet':>13}")
    for servers in (1, 2):
        ours = mxkit.run("comm", {"iters": iters}, 2, servers)
        theirs = mxnet.run("comm", {"iters": iters}, 2, servers) if mxnet else {}
        rows = [("latency, 4-byte key (ms)", "tiny_ms"), ("latency, 100 keys x 1 KiB (ms)", "model_ms"),
                ("throughput, 4 MiB (GB/s)", f"gbps_{4 * 2**20}"), ("throughput, 64 MiB (GB/s)", f"gbps_{64 * 2**20}")]
        for label, key in rows:
            print(f"{label:<34}{servers:>8}{cell(ours.get(key)):>10}{cell(theirs.get(key)):>10}"
                  f"{ratio(ours.get(key), theirs.get(key)):>13}")
        if ours.get("tiny_ms") and ours.get("model_ms"):
            print(f"{'  mxkit: 100-key step / 1-key':<34}{servers:>8}{ours['model_ms'] / ours['tiny_ms']:>10.2f}",
                  flush=True)


def _best(runs: list[dict]) -> dict:
    """The run with the most samples/s (a loaded machine only ever makes a run slower)."""
    return max(runs, key=lambda run: run.get("samples_per_s") or 0.0, default={})


def training_table(mxkit: MxkitJobs, mxnet: MXNetJobs | None, epochs: int, worker_counts: tuple[int, ...],
                   taus: tuple[int, ...], repeat: int = 1, server_counts: tuple[int, ...] = (1,),
                   kinds: tuple[str, ...] = ("dist_sync", "dist_async")) -> None:
    print(f"\nMLP training (Module, SGD momentum 0.9, batch 64 per worker, {epochs} epochs over 4096 samples), "
          f"best of {repeat} run(s) each, mxkit's and MXNet's alternating")
    print("samples/s after the first epoch (steady state); 'whole': mxkit/MXNet over the whole run, the first "
          "epoch's warm-up included")
    print(f"{'kvstore':<16}{'workers':>8}{'servers':>8}{'mxkit samples/s':>17}{'MXNet samples/s':>17}"
          f"{'mxkit/MXNet':>13}{'whole':>7}   mxkit validation accuracy after each epoch @ seconds  |  MXNet's")
    configs = [(kind, {}, n, s) for kind in kinds if kind != "dist_ssp" for s in server_counts for n in worker_counts]
    if "dist_ssp" in kinds:
        configs += [("dist_ssp", {"tau": tau}, max(worker_counts), 1) for tau in taus]
    for kind, options, workers, servers in configs:
        params = {"kvstore": kind, "kv_options": options, "epochs": epochs}
        ours_runs, their_runs = [], []
        for _ in range(repeat):
            ours_runs.append(mxkit.run("train", params, workers, servers))
            if mxnet and kind != "dist_ssp":
                their_runs.append(mxnet.run("train", params, workers, servers))
        ours, theirs = _best(ours_runs), _best(their_runs)
        label = kind + (f" tau={options['tau']}" if options else "")
        speed, other = ours.get("samples_per_s"), theirs.get("samples_per_s")
        curve = "  ".join(f"{acc:.3f}@{sec:.1f}" for sec, acc in ours.get("curve", []))
        if theirs.get("curve"):  # (the same data, seeds and schedule: a curve that falls does so on both)
            curve += "  |  " + " ".join(f"{acc:.3f}" for _, acc in theirs["curve"])
        whole = ratio(ours.get("whole_samples_per_s"), theirs.get("whole_samples_per_s"))
        print(f"{label:<16}{workers:>8}{servers:>8}{cell(speed, '{:,.0f}'):>17}{cell(other, '{:,.0f}'):>17}"
              f"{ratio(speed, other):>13}{whole:>7}   {curve}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations, rows and epochs")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-comm", action="store_true")
    parser.add_argument("--workers", help="comma-separated worker counts of the training rows (default 1,2,4; "
                                          "--quick: 1,2)")
    parser.add_argument("--servers", default="1,2", help="comma-separated server counts of the training rows")
    parser.add_argument("--kinds", default="dist_sync,dist_async,dist_ssp",
                        help="comma-separated store types of the training rows")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each training row (the best is shown)")
    parser.add_argument("--epochs", type=int, help="epochs of each training row (default 4; --quick: 2)")
    args = parser.parse_args()
    python = os.environ.get("MXKIT_BENCH_MXNET_PYTHON")
    mxnet = MXNetJobs(python) if python else None
    mxkit = MxkitJobs()
    print(f"Ray started in {mxkit.startup_seconds:.1f} s at {mxkit.address}; MXNet: {python or 'not given'}")
    try:
        if not args.skip_comm:
            communication_table(mxkit, mxnet, iters=20 if args.quick else 100)
        if not args.skip_training:
            workers = args.workers or ("1,2" if args.quick else "1,2,4")
            training_table(mxkit, mxnet, epochs=args.epochs or (2 if args.quick else 4),
                           worker_counts=tuple(int(n) for n in workers.split(",")),
                           taus=(1, 4) if args.quick else (1, 2, 4, 8), repeat=max(1, args.repeat),
                           server_counts=tuple(int(n) for n in args.servers.split(",")),
                           kinds=tuple(args.kinds.split(",")))
    finally:
        mxkit.close()


if __name__ == "__main__":
    main()
