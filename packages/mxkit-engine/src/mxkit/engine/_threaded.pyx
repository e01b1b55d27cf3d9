# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: language = c++
"""The threaded engines (MXNet 1.x's ThreadedEngine and ThreadedEnginePerDevice).

``ThreadedEngine`` checks arguments, removes duplicate vars, picks the worker pool of a
device and hands the operation to its :class:`~mxkit.engine._core.EngineCore`, which
keeps the dependency queues and runs the workers.
"""

import os
import weakref

from cpython.object cimport PyCallable_Check
from cpython.ref cimport PyObject
from libcpp.vector cimport vector

from mxkit.core.context import Context
from mxkit.core.errors import EngineError

from mxkit.engine import _errors
from mxkit.engine._core import _noop
from mxkit.engine._core cimport MX_OPR_ASYNC, MX_OPR_DELETE, MX_OPR_SYNC, EngineCore, ErrorBox, Var


cdef class ThreadedEngine:
    """A threaded dependency engine.

    Parameters
    ----------
    name : str
        ``"threaded"`` (one pool shared by every device) or ``"threaded_per_device"``
        (a pool per device, plus a pool for operations pushed with ``priority > 0``).
    num_workers : int, optional
        Worker threads of the shared pool (``threaded``) or of each CPU device's pool;
        by default config ``cpu_workers`` (0: automatic, see :func:`automatic_cpu_workers`).
    priority_workers : int
        Worker threads of the priority pool (``threaded_per_device`` only).
    gpu_workers : int
        Compute workers per GPU device (a separate pool of the same size takes copies).
    """

    #: A class attribute, read on the type (a wrapper that forwards attributes to an engine
    #: does not inherit it by accident): :meth:`push` takes ``small=``.
    inline_small_ops = True

    def __init__(self, str name="threaded_per_device", num_workers=None, priority_workers=1, gpu_workers=1):
        if name not in ("threaded", "threaded_per_device"):
            raise EngineError(f"unknown threaded engine kind {name!r}; choose 'threaded' or 'threaded_per_device'")
        self.name = name
        self._per_device = name == "threaded_per_device"
        self.num_workers = _resolve_workers(num_workers)
        self.priority_workers = _positive_int(priority_workers, "priority_workers")
        self._gpu_workers = _positive_int(gpu_workers, "gpu_workers")
        self._core = EngineCore()
        self._pool_index = {}
        self._default_pool = self._core.add_pool(self.num_workers, "cpu0" if self._per_device else "shared")
        self._pool_index[("cpu", 0, False)] = self._default_pool
        self._priority_pool = -1
        if self._per_device:
            self._priority_pool = self._core.add_pool(self.priority_workers, "priority")
        self._last_ctx = None
        self._last_pool = self._default_pool
        self._inherited = weakref.WeakKeyDictionary()

    def __dealloc__(self):
        # The workers hold the core; tell them to leave once their work is done.
        if self._core is not None and self._core.in_this_process():
            self._core.request_stop()

    # -- vars --------------------------------------------------------------------------

    def new_var(self, name=None):
        """Return a new variable (its ``version`` starts at 0)."""
        self._check_usable()
        return Var(self._core, name)

    def delete_var(self, var_obj, on_delete=None):
        """Delete ``var`` once every operation pushed on it so far has completed.

        ``on_delete()`` (e.g. freeing the var's memory) runs then, on a worker, even if
        the var holds an error. Using ``var`` in a later push is an EngineError.
        """
        cdef Var var = _checked_var(self, var_obj)
        if on_delete is not None and not PyCallable_Check(on_delete):
            raise _errors.bad_callable(on_delete, "delete_var(on_delete=...)")
        self.push_fast(on_delete if on_delete is not None else _noop, (), (var,), self._default_pool, 0,
                       "delete_var", MX_OPR_DELETE, False)
        var.deleted = True

    # -- pushing -----------------------------------------------------------------------

    def push(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False, bint small=False):
        """Push ``fn()``, to run once every earlier write of ``reads`` and every earlier
        read and write of ``writes`` has completed.

        Parameters
        ----------
        fn : callable
            Takes no argument; runs on a worker thread with the GIL.
        reads, writes : tuple or list of Var
            Vars the operation reads / writes; a var in both counts as a write.
        ctx : mxkit.core.Context, optional
            The device the operation runs for (selects the worker pool); cpu(0) if None.
        priority : int
            Higher runs first among ready operations of a pool.
        name : str, optional
            Named in error messages.
        copy : bool
            A device copy: runs on the device's copy pool (GPUs), not its compute pool.
        small : bool
            ``fn`` is short (a kernel on a few KiB to MiB): when every var is granted at
            once and the pool has nothing ready, it runs right here on the calling thread,
            which saves the hand-over to a worker and back (its errors still stay on its
            writes, raised by the next wait). Leave False for anything long: it would
            block the caller instead of overlapping with it. See :attr:`inline_small_ops`.
        """
        cdef int pool
        if type(priority) is not int:
            raise _errors.bad_priority(priority)
        if ctx is None and priority <= 0:
            pool = self._default_pool
        else:
            pool = self.pool_for(ctx, priority, copy)
        self.push_fast(fn, reads, writes, pool, priority, name, MX_OPR_SYNC, small)

    def push_async(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False):
        """Push ``fn(on_complete)``: it starts work (often on another thread) and returns;
        the operation is complete when ``on_complete()`` (or ``on_complete(exc)``) is called.

        The other parameters are as for :meth:`push`.
        """
        cdef int pool
        if type(priority) is not int:
            raise _errors.bad_priority(priority)
        if ctx is None and priority <= 0:
            pool = self._default_pool
        else:
            pool = self.pool_for(ctx, priority, copy)
        self.push_fast(fn, reads, writes, pool, priority, name, MX_OPR_ASYNC, False)

    cpdef int pool_for(self, object ctx, int priority, bint copy) except -1:
        """Index of the worker pool that serves operations for ``ctx`` at ``priority``."""
        if ctx is not None and not isinstance(ctx, Context):
            raise EngineError(f"ctx must be an mxkit.core.Context or None, got {ctx!r}")
        if not self._per_device:
            return self._default_pool
        if priority > 0:
            return self._priority_pool
        if ctx is None:
            return self._default_pool
        if ctx is self._last_ctx:
            return self._last_pool
        device_type = (<object>ctx).device_type
        is_cpu = device_type in ("cpu", "cpu_pinned", "cpu_shared")
        key = ("cpu" if is_cpu else device_type, (<object>ctx).device_id, bool(copy) and not is_cpu)
        pool = self._pool_index.get(key)
        if pool is None:
            workers = self.num_workers if is_cpu else self._gpu_workers
            label = f"{key[0]}{key[1]}" + ("-copy" if key[2] else "")
            pool = self._core.add_pool(workers, label)
            self._pool_index[key] = pool
        if not copy:
            self._last_ctx, self._last_pool = ctx, pool
        return pool

    cdef int push_fast(self, object fn, object reads, object writes, int pool, int priority,
                       object name, int kind, bint small) except -1:
        cdef EngineCore core = self._core
        cdef vector[PyObject*] write_vars
        cdef vector[PyObject*] read_vars
        cdef PyObject* ptr
        cdef Var var
        cdef size_t i, j
        cdef size_t n_rw = 0
        cdef bint seen
        if core.closed or not core.in_this_process():
            self._check_usable()
        if not PyCallable_Check(fn):
            raise _errors.bad_callable(fn, "push_async" if kind == MX_OPR_ASYNC else "push")
        if type(writes) is not tuple and type(writes) is not list:
            raise _errors.bad_var_list(writes, "writes")
        if type(reads) is not tuple and type(reads) is not list:
            raise _errors.bad_var_list(reads, "reads")
        for obj in writes:
            if type(obj) is not Var or (<Var>obj).core is not core:
                obj = self._adopt(obj)
            if (<Var>obj).deleted:
                raise _errors.deleted_var(obj)
            ptr = <PyObject*>obj
            seen = False
            for j in range(write_vars.size()):
                if write_vars[j] == ptr:
                    seen = True
                    break
            if not seen:
                write_vars.push_back(ptr)
        for obj in reads:
            if type(obj) is not Var or (<Var>obj).core is not core:
                obj = self._adopt(obj)
            if (<Var>obj).deleted:
                raise _errors.deleted_var(obj)
            ptr = <PyObject*>obj
            seen = False
            for j in range(write_vars.size()):  # read and written: a write that inherits errors
                if write_vars[j] == ptr:
                    seen = True
                    if j >= n_rw:  # keep the read-and-written vars first
                        write_vars[j] = write_vars[n_rw]
                        write_vars[n_rw] = ptr
                        n_rw += 1
                    break
            if not seen:
                for j in range(read_vars.size()):
                    if read_vars[j] == ptr:
                        seen = True
                        break
            if not seen:
                read_vars.push_back(ptr)

        core.submit(fn, write_vars, read_vars, <int>n_rw, pool, priority, name, kind, small)
        return 0

    # -- waiting -----------------------------------------------------------------------

    def wait_for_var(self, var_obj):
        """Wait until every operation pushed so far that writes ``var`` has completed.

        Raises
        ------
        EngineError
            If the last write of ``var`` failed (or inherited a failure): the message names
            the failing operation and the original exception is chained. The error stays
            on ``var`` (every wait raises it again, every op reading it is skipped) until
            an operation overwrites ``var`` (writes it without reading it).
        KeyboardInterrupt
            On Ctrl-C; the operations keep running.
        """
        cdef Var var = _checked_var(self, var_obj)
        self._core.wait_var(var)
        box = self._core.var_error(var)
        if box is not None:
            exc = (<ErrorBox>box).exc
            raise _errors.operation_failed((<ErrorBox>box).op_name, exc) from exc

    def wait_all(self):
        """Wait until every pushed operation has completed.

        Raises
        ------
        EngineError
            For the first failed operation that no wait reported yet (the message counts
            and names the others); each failure is raised once by ``wait_all``, and not
            at all if a ``wait_for_var`` raised it first. The vars keep their errors:
            reading a failed op's output still raises.
        """
        if self._core.on_own_worker():
            raise EngineError(
                "wait_all() inside an operation running on this engine would wait for itself; "
                "push the follow-up work with the right reads/writes instead")
        self._core.wait_pending_zero()
        failures = self._core.take_unreported_errors()
        if failures:
            raise _errors.first_of_failures(failures) from failures[0][1]

    def shutdown(self, timeout=None):
        """Refuse new pushes, wait up to ``timeout`` s (None: forever) for the pending
        ones, and stop the worker threads. Errors are not raised here."""
        core = self._core
        if core.closed or not core.in_this_process():
            return
        core.closed = True
        core.wait_pending_zero(-1.0 if timeout is None else float(timeout))
        core.request_stop()
        for thread in core.threads:
            thread.join(0.5 if timeout is None else min(0.5, float(timeout)))

    @property
    def pending(self):
        """Operations pushed and not yet complete."""
        return self._core.pending


    @property
    def num_pools(self):
        """Worker pools made so far (devices seen, plus the priority pool)."""
        return self._core.pools.size()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.shutdown()

    def __repr__(self):
        return f"<ThreadedEngine {self.name!r} workers={self.num_workers} pending={self.pending}>"

    # -- checks ------------------------------------------------------------------------

    cdef Var _adopt(self, object obj):
        """This engine's stand-in for ``obj``, a var of an engine made before ``os.fork()``
        (e.g. the var of an NDArray that a DataLoader worker inherited); anything else is
        an EngineError. The stand-in is made once per parent var, complete (or holding the
        error reading the parent's var would raise), so the child reads its copy-on-write
        copy of the data and may write it without touching the parent."""
        if getattr(obj, "made_before_fork", False) is not True:
            raise _errors.bad_var(obj, self.name)
        if not self._core.in_this_process():
            self._check_usable()
        var = self._inherited.get(obj)
        if var is None:
            var = Var(self._core, obj.name)
            error = obj.error_at_fork()
            if error is not None:
                (<Var>var).error = ErrorBox(error[1], error[0])
            self._inherited[obj] = var
        return <Var>var

    def _check_usable(self):
        if not self._core.in_this_process():
            raise EngineError(
                "this engine was made before os.fork() and has no worker threads in the child "
                "process; use mxkit.engine.get() (a fresh engine) or mxkit.engine.create() here")
        if self._core.closed:
            raise EngineError("this engine was shut down; make a new one with mxkit.engine.create()")


cdef Var _checked_var(ThreadedEngine engine, object obj):
    if type(obj) is not Var or (<Var>obj).core is not engine._core:
        obj = engine._adopt(obj)
    if (<Var>obj).deleted:
        raise _errors.deleted_var(obj)
    if not engine._core.in_this_process():
        engine._check_usable()
    return <Var>obj


cdef int _positive_int(value, str what) except -1:
    if type(value) is not int or value < 1:
        raise EngineError(f"{what} must be an int >= 1, got {value!r}")
    return value


def automatic_cpu_workers():
    """Config ``cpu_workers`` at 0: what a plugin's kernels ask for (the ``mxkit_cpu_workers``
    hook: one, where every kernel spreads itself over the cores), else one per core."""
    from mxkit.core.plugins import preferred_cpu_workers

    preferred = preferred_cpu_workers()
    if preferred is not None:
        return preferred
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


cdef int _resolve_workers(value) except -1:
    if value is None:
        from mxkit.core import config

        value = config.get("cpu_workers")
        if value == 0:
            value = automatic_cpu_workers()
    return _positive_int(value, "num_workers")
