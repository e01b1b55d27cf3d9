"""Worker processes of ``DataLoader(num_workers > 0)``: batches come back through shared memory.

Each worker is a child process (forked where the platform allows, so the dataset and the
batchify function reach it without being pickled; the engine of a forked child is a fresh
one). The parent sends it a batch's sample indices as JSON; the worker makes the batch with
numpy, writes every array into its own file in shared memory (``/dev/shm`` where it exists)
and answers with a JSON description: the nesting of the batch and, for each array, its
file, dtype and shape. Nothing crosses the pipe as a pickle, in either direction.

The parent checks every description before it reads (a file of this pool's own directory,
a plain numeric dtype, a shape whose size is the file's), copies the array out and deletes
the file. A worker that raises sends the exception's type, message and traceback, which the
parent raises as a :class:`WorkerError`; a worker that dies (killed, out of memory) is seen
through its process sentinel, and the parent raises a :class:`WorkerError` naming it and
its exit code instead of waiting forever.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

import numpy as np
from mxkit.gluon.parameter import GluonError

#: the largest JSON message a worker may send (a batch's description, or an error)
_MAX_MESSAGE = 1 << 20
#: dtypes an array may have on the way back (no object arrays: they would need a pickle)
_DTYPES = frozenset(["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                     "float32", "float64"])
_MAX_NDIM = 32


class WorkerError(GluonError):
    """A DataLoader worker process raised an exception, died, or sent something malformed."""


def _shared_memory_dir() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# -- the worker side -----------------------------------------------------------------------------

def numpy_batchify(samples: list[Any]) -> Any:
    """The default batchify of a worker: numpy arrays stacked along a new first axis (float64
    as float32, as :func:`default_batchify_fn`), tuples element-wise."""
    first = samples[0]
    if isinstance(first, tuple | list):
        return [numpy_batchify(list(items)) for items in zip(*samples)]
    array = np.stack([np.asarray(_as_numpy(s)) for s in samples])
    return array.astype(np.float32) if array.dtype == np.float64 else array


def _as_numpy(value: Any) -> Any:
    asnumpy = getattr(value, "asnumpy", None)
    return asnumpy() if callable(asnumpy) else value


def _describe(value: Any, directory: str, counter: list[int]) -> Any:
    """The JSON description of ``value``, its arrays written to files in ``directory``."""
    from mxkit.ndarray import NDArray

    if isinstance(value, list | tuple):
        return {"list": [_describe(v, directory, counter) for v in value], "tuple": isinstance(value, tuple)}
    is_nd = isinstance(value, NDArray)
    if is_nd or isinstance(value, np.ndarray | np.generic):
        array = np.ascontiguousarray(_as_numpy(value))
        if array.dtype.name not in _DTYPES:
            raise TypeError(f"a batch array has dtype {array.dtype}, which cannot leave a worker process; use one "
                            f"of {sorted(_DTYPES)}")
        counter[0] += 1
        fd, path = tempfile.mkstemp(prefix=f"b{counter[0]}-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(array.tobytes())
        return {"file": os.path.basename(path), "dtype": array.dtype.name, "shape": list(array.shape), "nd": is_nd}
    if value is None or isinstance(value, bool | int | float | str):
        return {"value": value}
    raise TypeError(f"batchify_fn returned a {type(value).__name__}, which cannot leave a worker process; return "
                    f"arrays, numbers, strings, or lists and tuples of them")


def _worker_loop(conn: Any, dataset: Any, batchify: Callable[[list[Any]], Any], directory: str) -> None:
    counter = [0]
    while True:
        try:
            message = json.loads(conn.recv_bytes(_MAX_MESSAGE))
        except (EOFError, OSError):
            return  # the parent is gone
        if message.get("stop"):
            return
        try:
            batch = batchify([dataset[index] for index in message["indices"]])
            reply = {"id": message["id"], "batch": _describe(batch, directory, counter)}
        except Exception as exc:
            reply = {"id": message["id"], "error": type(exc).__name__, "message": str(exc)[:10000],
                     "traceback": traceback.format_exc()[-20000:]}
        conn.send_bytes(json.dumps(reply).encode("utf-8"))


# -- the parent side -----------------------------------------------------------------------------

class WorkerPool:
    """``num_workers`` processes making batches of ``dataset`` with ``batchify``.

    Parameters
    ----------
    dataset : Dataset
    batchify : callable
        Runs in the workers: returns numpy arrays or NDArrays (nested in lists/tuples).
    num_workers : int
    timeout : float
        Seconds to wait for one batch before giving up (the workers are alive but stuck).
    ndarray_batches : bool
        Return every array as an NDArray (else only those the worker had as NDArrays).
    """

    def __init__(self, dataset: Any, batchify: Callable[[list[Any]], Any], num_workers: int,
                 timeout: float, ndarray_batches: bool = False) -> None:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._directory = tempfile.mkdtemp(prefix="mxkit-dataloader-", dir=_shared_memory_dir())
        self._timeout = timeout
        self._ndarray_batches = ndarray_batches
        self._workers = []
        self._conns = []
        for _ in range(num_workers):
            parent_end, child_end = context.Pipe(duplex=True)
            process = context.Process(target=_worker_loop, args=(child_end, dataset, batchify, self._directory),
                                      daemon=True, name="mxkit-dataloader-worker")
            process.start()
            child_end.close()
            self._workers.append(process)
            self._conns.append(parent_end)
        self._next_id = 0
        self._busy: dict[int, int] = {}  # task id -> worker
        self._done: dict[int, Any] = {}
        self._closed = False

    def submit(self, indices: list[int]) -> int:
        """Send a batch to the least busy worker; returns the task id to :meth:`get`."""
        load = [0] * len(self._workers)
        for worker in self._busy.values():
            load[worker] += 1
        worker = load.index(min(load))
        task = self._next_id
        self._next_id += 1
        self._conns[worker].send_bytes(json.dumps({"id": task, "indices": [int(i) for i in indices]}).encode())
        self._busy[task] = worker
        return task

    def get(self, task: int) -> Any:
        """The batch of ``task`` (NDArrays where the worker had arrays), waiting for it."""
        while task not in self._done:
            self._receive_some()
        reply = self._done.pop(task)
        if "error" in reply:
            raise WorkerError(f"a DataLoader worker raised {reply['error']}: {reply['message']}\n"
                              f"--- the worker's traceback ---\n{reply['traceback']}")
        return self._rebuild(reply["batch"])

    def discard(self, task: int) -> None:
        """Wait for ``task`` and drop its batch (an epoch left early)."""
        try:
            while task not in self._done:
                self._receive_some()
            reply = self._done.pop(task)
            if "batch" in reply:
                self._delete_files(reply["batch"])
        except WorkerError:
            pass

    def _receive_some(self) -> None:
        sentinels = {w.sentinel: i for i, w in enumerate(self._workers)}
        ready = wait([*self._conns, *sentinels], timeout=self._timeout)
        if not ready:
            raise WorkerError(f"no batch from the DataLoader workers in {self._timeout} s (timeout=); they are alive "
                              f"but stuck, or a batch takes longer: raise timeout")
        for item in ready:
            if item in sentinels:
                continue
            index = self._conns.index(item)
            try:
                raw = item.recv_bytes(_MAX_MESSAGE)
            except (EOFError, OSError):
                continue  # the worker died: its sentinel says how
            reply = self._parse(raw, index)
            self._busy.pop(reply["id"], None)
            self._done[reply["id"]] = reply
        for item in ready:
            if item in sentinels:
                index = sentinels[item]
                if index in self._busy.values():
                    process = self._workers[index]
                    process.join(1)
                    code = process.exitcode
                    how = f"was killed by signal {-code}" if code is not None and code < 0 else \
                        f"exited with code {code}"
                    self.close()
                    raise WorkerError(f"DataLoader worker {index} (pid {process.pid}) {how} while making a batch "
                                      f"(out of memory, or a crash in native code); the loader's workers are shut "
                                      f"down")

    def _parse(self, raw: bytes, worker: int) -> dict:
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise WorkerError(f"DataLoader worker {worker} sent a malformed message: {exc}") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("id"), int) or reply["id"] not in self._busy:
            raise WorkerError(f"DataLoader worker {worker} answered a batch it was not given")
        return reply

    def _path(self, name: Any) -> str:
        if not isinstance(name, str) or os.path.basename(name) != name or not name.startswith("b"):
            raise WorkerError(f"a DataLoader worker named the shared-memory file {name!r}, which is not one of its own")
        return os.path.join(self._directory, name)

    def _rebuild(self, tree: Any) -> Any:
        from mxkit import ndarray

        if not isinstance(tree, dict):
            raise WorkerError("a DataLoader worker sent a malformed batch description")
        if "list" in tree:
            items = [self._rebuild(item) for item in tree["list"]]
            return tuple(items) if tree.get("tuple") else items
        if "value" in tree:
            return tree["value"]
        path = self._path(tree.get("file"))
        try:
            dtype, shape = tree["dtype"], tree["shape"]
            if dtype not in _DTYPES or not isinstance(shape, list) or len(shape) > _MAX_NDIM or \
                    not all(isinstance(d, int) and d >= 0 for d in shape):
                raise WorkerError(f"a DataLoader worker described an array as dtype {dtype!r}, shape {shape!r}")
            count = int(np.prod(shape, dtype=np.int64))
            expected = count * np.dtype(dtype).itemsize
            size = os.path.getsize(path)
            if size != expected:
                raise WorkerError(f"a DataLoader worker's array file holds {size} bytes, but dtype {dtype} and shape "
                                  f"{tuple(shape)} need {expected}")
            array = np.fromfile(path, dtype=dtype, count=count).reshape(shape)
        finally:
            if os.path.exists(path):
                os.unlink(path)
        return ndarray.array(array, dtype=array.dtype) if tree.get("nd") or self._ndarray_batches else array

    def _delete_files(self, tree: Any) -> None:
        if isinstance(tree, dict) and "list" in tree:
            for item in tree["list"]:
                self._delete_files(item)
        elif isinstance(tree, dict) and "file" in tree:
            try:
                os.unlink(self._path(tree["file"]))
            except (OSError, WorkerError):
                pass

    def alive(self) -> bool:
        """Whether every worker is still running."""
        return not self._closed and all(w.is_alive() for w in self._workers)

    def close(self) -> None:
        """Stop the workers and remove the shared-memory directory."""
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            try:
                conn.send_bytes(b'{"stop": true}')
            except (OSError, ValueError):
                pass
        for process in self._workers:
            process.join(2)
            if process.is_alive():
                process.terminate()
                process.join(2)
        for conn in self._conns:
            conn.close()
        shutil.rmtree(self._directory, ignore_errors=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


__all__ = ["WorkerError", "WorkerPool", "numpy_batchify"]
