"""``mxkit launch``: run a distributed job's workers against KVStore servers on Ray.

The launcher plays the part of MXNet's ``tools/launch.py`` with ps-lite's roles moved onto
Ray: it connects to a running Ray cluster (``--address``) or starts a local one bound to
127.0.0.1, starts the job's coordinator and servers as Ray actors
(:func:`mxkit.kvstore.dist.job.start_job`), then runs ``WORKERS`` copies of the command,
each with ``MXKIT_RANK``, ``MXKIT_NUM_WORKERS``, ``MXKIT_JOB_NAMESPACE`` and the variables
that connect it to the cluster in its environment, so that ``mx.kv.create("dist_sync")``
inside it joins the job.

Workers run as local processes (``--placement local``, the default) or as Ray tasks spread
over the cluster's nodes (``--placement spread``). Every line a worker prints is printed
here prefixed with ``[rank]``. The launcher's exit status is 0 when every worker exits 0;
otherwise the first failing worker's status (and the other workers are stopped, since a
``dist_sync`` job cannot finish without them). On exit, Ctrl-C included, it stops the
workers, the job's actors and the Ray instance it started, and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from mxkit.core.errors import ConfigError, MissingComponentError

#: seconds a worker gets to exit after SIGTERM before it is killed
TERMINATE_GRACE_SECONDS = 5.0
PLACEMENTS = ("local", "spread")


@dataclass
class LaunchSpec:
    """What ``mxkit launch`` was asked to run."""

    command: list[str]
    num_workers: int
    num_servers: int
    address: str | None = None
    placement: str = "local"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: whether the job's servers accept kv.set_updater (a function sent to them and run there)
    allow_remote_code: bool = False
    #: a file for Ray's own log lines (its INFO lines and token notices); None: the console
    ray_log: str | None = None

    def check(self) -> None:
        """Raise :class:`ConfigError` for a request that cannot run, saying what would."""
        if not self.command:
            raise ConfigError("mxkit launch needs the worker command after '--', e.g. "
                              "mxkit launch -n 2 -s 1 -- python train.py")
        for what, value in (("-n/--num-workers", self.num_workers), ("-s/--num-servers", self.num_servers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"mxkit launch {what} must be a positive integer, got {value!r}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"mxkit launch --placement {self.placement!r}: choose one of {', '.join(PLACEMENTS)}")


def _dist_modules() -> tuple[Any, Any]:
    try:
        from mxkit.kvstore.dist import job, runtime
    except ModuleNotFoundError as exc:
        raise MissingComponentError(
            f"mxkit launch needs the distributed KVStore, which is not installed ({exc.name} is missing); "
            f"install it with pip install 'mxkit-kvstore[dist]'") from None
    return job, runtime


class _PrefixedPrinter:
    """Prints lines of several workers to one stream, whole lines at a time, each prefixed."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._lock = threading.Lock()

    def line(self, rank: int, text: str) -> None:
        with self._lock:
            self._stream.write(f"[{rank}] {text}" if text.endswith("\n") else f"[{rank}] {text}\n")
            self._stream.flush()


#: how long a finished worker's remaining output is waited for (a loaded machine can be slow to drain it)
OUTPUT_DRAIN_SECONDS = 10.0


class LocalWorker:
    """One worker as a local process in its own process group (so stopping it stops its children)."""

    def __init__(self, rank: int, command: Sequence[str], env: dict[str, str], printer: _PrefixedPrinter):
        self.rank = rank
        try:
            self._process = subprocess.Popen(
                list(command), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, text=True, errors="replace", bufsize=1)
        except OSError as exc:
            raise ConfigError(f"mxkit launch could not start worker {rank}: {command[0]!r}: {exc.strerror}") from None
        self._reader = threading.Thread(target=self._forward, args=(printer,), daemon=True,
                                        name=f"mxkit-launch-output-{rank}")
        self._reader.start()

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return int(self._process.pid)

    def _forward(self, printer: _PrefixedPrinter) -> None:
        assert self._process.stdout is not None
        for text in self._process.stdout:
            printer.line(self.rank, text)

    def poll(self) -> int | None:
        """The exit status once the worker has exited (and its output is all printed), else None."""
        status = self._process.poll()
        if status is not None:
            # its last lines may still be in the pipe; bounded, as a child it left behind can hold
            # the pipe open for ever
            self._reader.join(timeout=OUTPUT_DRAIN_SECONDS)
        return status

    def stop(self) -> None:
        """SIGTERM the worker's process group; SIGKILL what is left after a grace period."""
        if self._process.poll() is None:
            _signal_group(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(TERMINATE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        # children that outlived their parent are still in the group
        _signal_group(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._reader.join(timeout=OUTPUT_DRAIN_SECONDS)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class SpreadWorker:
    """One worker as a Ray task that runs the command on whichever node Ray spreads it to.

    The task streams the worker's lines back through a Ray queue, so they are printed here
    with the rank prefix like a local worker's.
    """

    def __init__(self, rank: int, command: Sequence[str], env: dict[str, str], printer: _PrefixedPrinter,
                 queue: Any):
        import ray

        self.rank = rank
        self._printer = printer
        self._queue = queue
        self._ref = _remote_worker().options(scheduling_strategy="SPREAD").remote(rank, list(command), env, queue)
        self._status: int | None = None
        self._ray = ray

    @property
    def pid(self) -> int | None:
        """Unknown here: the process runs on a cluster node."""
        return None

    def poll(self) -> int | None:
        """The exit status once the task has finished, else None."""
        if self._status is None:
            ready, _ = self._ray.wait([self._ref], timeout=0)
            if ready:
                try:
                    self._status = int(self._ray.get(self._ref))
                except Exception as exc:  # the task itself died (node lost): report it as a failure
                    self._printer.line(self.rank, f"mxkit launch: the worker's Ray task failed: {exc}")
                    self._status = 1
        return self._status

    def stop(self) -> None:
        """Cancel the task; Ray kills the worker process it runs."""
        if self._status is None:
            self._ray.cancel(self._ref, force=True)


_REMOTE_WORKER: Any = None


def _remote_worker() -> Any:
    """The Ray task that runs one worker command on a node (made once, when Ray is imported)."""
    global _REMOTE_WORKER
    if _REMOTE_WORKER is None:
        import ray

        @ray.remote(num_cpus=0, max_retries=0)
        def run_worker(rank: int, command: list[str], env: dict[str, str], queue: Any) -> int:
            process = subprocess.Popen(command, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       errors="replace", bufsize=1)
            assert process.stdout is not None
            for text in process.stdout:
                queue.put((rank, text))
            return int(process.wait())

        _REMOTE_WORKER = run_worker
    return _REMOTE_WORKER


#: thread-pool sizes a worker inherits when several share one machine (BLAS, OpenMP, mxkit-cpu's kernels)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MXKIT_CPU_KERNEL_THREADS")


def worker_environments(base: dict[str, str], cluster_env: dict[str, str], job_env: dict[str, str],
                        num_workers: int, cores: int | None = None) -> list[dict[str, str]]:
    """The environment of each worker: the launcher's, then the cluster's and the job's, then its rank.

    Python workers write unbuffered (``PYTHONUNBUFFERED=1``) unless the launcher's environment
    says otherwise, so each line is printed when the worker prints it.

    With ``cores`` (the workers share this machine), each worker's thread pools get an equal
    share of them unless the launcher's environment sets a size: every worker sizing its
    pools for the whole machine made two MLP workers on two cores 15 times slower.
    """
    shared = {}
    if cores is not None:
        share = str(max(1, cores // num_workers))
        shared = {name: share for name in THREAD_VARIABLES if name not in base}
    # A Python worker writing to the launcher's pipe buffers its output in blocks: lines would
    # arrive late, and be lost when the worker is stopped by a signal after another one failed.
    unbuffered = {} if "PYTHONUNBUFFERED" in base else {"PYTHONUNBUFFERED": "1"}
    return [{**base, **shared, **unbuffered, **cluster_env, **job_env, "MXKIT_RANK": str(rank),
             "MXKIT_NUM_WORKERS": str(num_workers)} for rank in range(num_workers)]


def launch(spec: LaunchSpec, stream: TextIO | None = None, log: Callable[[str], None] | None = None) -> int:
    """Run ``spec``'s workers against a new job's servers; the exit status for ``mxkit launch``.

    Raises
    ------
    ConfigError
        If the request is malformed or a worker command cannot be started.
    MissingComponentError
        If the distributed KVStore (Ray) is not installed.
    """
    spec.check()
    job_module, runtime = _dist_modules()
    out = stream if stream is not None else sys.stdout
    say = log if log is not None else (lambda text: print(f"mxkit launch: {text}", file=sys.stderr, flush=True))
    printer = _PrefixedPrinter(out)
    started = time.perf_counter()
    if spec.ray_log is not None:
        route_ray_logging(spec.ray_log)
    say("starting a local Ray cluster on 127.0.0.1 (a few seconds)..." if spec.address is None
        else f"connecting to the Ray cluster at {spec.address}...")
    try:
        address = runtime.init_ray(spec.address)  # gives up after config kvstore_timeout
    except KeyboardInterrupt:
        say("interrupted while connecting to the Ray cluster")
        runtime.shutdown_ray()
        return 130
    job = None
    workers: list[Any] = []
    relay: _QueueRelay | None = None
    try:
        job = job_module.start_job(spec.num_workers, spec.num_servers, allow_remote_code=spec.allow_remote_code)
        say(f"job {job.namespace}: {_count(spec.num_servers, 'server')} on Ray at {address}, "
            f"{_count(spec.num_workers, 'worker')} ({spec.placement}) after {time.perf_counter() - started:.1f} s"
            + (f"; Ray's own log: {spec.ray_log}" if spec.ray_log is not None else ""))
        cores = os.cpu_count() if spec.placement == "local" else None
        # --env joins the launcher's own environment: it can size the thread pools, not change a rank
        envs = worker_environments({**os.environ, **spec.extra_env}, runtime.worker_environment(), job.env(),
                                   spec.num_workers, cores)
        if spec.placement == "spread":
            relay = _QueueRelay(printer)
            workers = [SpreadWorker(rank, spec.command, env, printer, relay.queue) for rank, env in enumerate(envs)]
        else:
            workers = [LocalWorker(rank, spec.command, env, printer) for rank, env in enumerate(envs)]
        return _wait_for(workers, say)
    except KeyboardInterrupt:
        say("interrupted: stopping the workers and the job")
        return 130
    finally:
        for worker in workers:
            worker.stop()
        if relay is not None:
            relay.close()
        if job is not None:
            job.stop()
        runtime.shutdown_ray()


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def route_ray_logging(path: str) -> None:
    """Send the log lines of Ray's Python logger (``ray`` and its children) to ``path``
    instead of the console: a user of ``mxkit launch`` reads the job's output, not Ray's
    start-up notices. ``--verbose`` keeps them on the console."""
    import logging

    import ray  # noqa: F401  (Ray attaches its console handler on import: replace it after)

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    logger = logging.getLogger("ray")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False


def _wait_for(workers: list[Any], say: Callable[[str], None]) -> int:
    """Wait until every worker has exited; stop the rest at the first failure and return its status."""
    running = {worker.rank: worker for worker in workers}
    while running:
        for rank, worker in list(running.items()):
            status = worker.poll()
            if status is None:
                continue
            del running[rank]
            if status != 0:
                say(f"worker {rank} exited with status {status}; stopping the other {len(running)} worker(s)")
                return status if status > 0 else 1
        time.sleep(0.05)
    return 0


class _QueueRelay:
    """Prints the lines that remote workers put on a Ray queue, from a thread of the launcher."""

    def __init__(self, printer: _PrefixedPrinter):
        from ray.util.queue import Queue

        self.queue = Queue(actor_options={"num_cpus": 0})
        self._printer = printer
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._relay, daemon=True, name="mxkit-launch-relay")
        self._thread.start()

    def _relay(self) -> None:
        from ray.util.queue import Empty

        while not self._done.is_set():
            try:
                rank, text = self.queue.get(timeout=0.2)
            except Empty:
                continue
            self._printer.line(rank, text)

    def close(self) -> None:
        """Print what is left on the queue, then stop relaying and drop the queue's actor."""
        self._done.set()
        self._thread.join(timeout=2.0)
        for rank, text in self.queue.get_nowait_batch(self.queue.size()):
            self._printer.line(rank, text)
        self.queue.shutdown(force=True)


__all__ = ["LaunchSpec", "LocalWorker", "SpreadWorker", "launch", "worker_environments"]
