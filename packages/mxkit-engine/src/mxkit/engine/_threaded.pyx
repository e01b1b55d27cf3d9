# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: language = c++
"""The threaded dependency engine (MXNet 1.x's ThreadedEngine), in Cython over C++.

Bookkeeping lives in C++ structures (``_engine_core.h``) guarded by their own short
std::mutex sections, never by a Python lock: a push registers the operation on the
queue of every var it touches, and the operation is handed to a worker pool when its
wait counter (vars not yet granted, plus one for the push itself) reaches zero. Worker
threads are Python threads that wait for work with the GIL released and run the pushed
callables with it; callables that release the GIL (numpy, BLAS, I/O) run in parallel.
"""

import atexit
import os
import threading
import weakref

from cpython.object cimport PyCallable_Check
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from libcpp.vector cimport vector

from mxkit.core.context import Context
from mxkit.core.errors import EngineError

from mxkit.engine import _errors


cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1


# Pools are kept in a vector reserved once, so worker threads may read it while a push
# adds a pool (a device seen for the first time) without a reallocation under them.
DEF MAX_POOLS = 256
# How often a waiting thread wakes up to let Ctrl-C (KeyboardInterrupt) through.
DEF WAIT_SLICE_MS = 20
# Rounds of sched_yield() a waiter spends before it sleeps (a few tens of microseconds).
cdef int _spin_rounds = 64

# Bumped in a child process after os.fork(): engines made before it have no worker
# threads there, and refuse to be used rather than wait forever.
cdef int _fork_generation = 0
_live_cores = weakref.WeakSet()
_abandoned_in_child = []
_worker_state = threading.local()


def _noop():
    pass


def _set_spin_rounds(int rounds):
    """Tune how long wait_for_var spins before sleeping (benchmarks); returns the old value."""
    global _spin_rounds
    old, _spin_rounds = _spin_rounds, max(rounds, 0)
    return old


cdef class ErrorBox:
    """The error of a failed operation, shared by every var it (or an op that inherited
    it) wrote. Reporting the error once (``wait_for_var``/``wait_all``) clears it for all."""

    def __init__(self, exc, op_name):
        self.exc = exc
        self.op_name = op_name

    def __repr__(self):
        return f"<ErrorBox {self.op_name!r}: {self.exc!r}>"


cdef class Var:
    """A variable of a threaded engine: a node of the dependency graph.

    Attributes
    ----------
    version : int
        Completed writes on this var.
    name : str or None
        The name given to ``new_var`` (for messages).
    """

    def __cinit__(self, EngineCore core, name=None):
        self.state = new MxVarState()
        self.core = core
        self.name = name
        self.id = core.next_var_id
        core.next_var_id += 1

    def __dealloc__(self):
        del self.state

    @property
    def version(self):
        return self.state.version

    @property
    def pending(self):
        """Operations queued on this var and not yet granted (for diagnostics)."""
        return self.state.queued()

    def __repr__(self):
        label = f" {self.name!r}" if self.name is not None else ""
        return f"<engine var {self.id}{label} version={self.state.version}>"


cdef class AsyncCompletion:
    """The ``on_complete`` handed to an asynchronous operation: call it exactly once,
    with no argument on success or with the exception on failure, from any thread."""

    cdef EngineCore core
    cdef MxOpr* op
    cdef bint done

    def __call__(self, exc=None):
        if self.done:
            raise EngineError(
                f"on_complete of engine operation {_op_label(self.op)!r} was called twice; "
                f"call it exactly once")
        self.done = True
        cdef ErrorBox box = None
        if exc is not None:
            if not isinstance(exc, BaseException):
                exc = EngineError(f"operation {_op_label(self.op)!r} completed with on_complete({exc!r}); "
                                  f"pass an exception or nothing")
            box = self.core.record_error(self.op, exc)
        self.core.complete(self.op, box, -1)

    @property
    def done(self):
        """True once on_complete has been called."""
        return self.done


cdef object _op_label(MxOpr* op):
    if op.name != NULL and <object>op.name is not None:
        return <object>op.name
    if op.fn != NULL:
        fn = <object>op.fn
        return getattr(fn, "__qualname__", None) or repr(fn)
    return None


cdef class EngineCore:
    """The state shared by a threaded engine and its worker threads."""

    def __cinit__(self):
        self.pools.reserve(MAX_POOLS)
        self.errors = []
        self.threads = []
        self.generation = _fork_generation
        _live_cores.add(self)

    def __dealloc__(self):
        cdef size_t i
        if self.generation != _fork_generation:
            return  # made before a fork: its mutexes may be held by threads that no longer exist
        for i in range(self.pools.size()):
            del self.pools[i]

    # -- pools and workers -------------------------------------------------------------

    def add_pool(self, int workers, str label):
        """Create a ready queue served by ``workers`` threads; return its index."""
        if self.pools.size() >= MAX_POOLS:
            raise EngineError(f"an engine supports at most {MAX_POOLS} worker pools (one per device kind)")
        cdef int index = self.pools.size()
        self.pools.push_back(new MxPool())
        for i in range(workers):
            thread = threading.Thread(target=self.worker_main, args=(index,), daemon=True,
                                      name=f"mxkit-engine-{label}-{i}")
            thread.start()
            self.threads.append(thread)
        return index

    def worker_main(self, int pool_index):
        """The loop of one worker thread: take ready operations and run them."""
        cdef MxPool* pool = self.pools[pool_index]
        cdef MxOpr* op
        _worker_state.core = self
        while True:
            op = pool.try_take()
            if op == NULL:
                with nogil:
                    op = pool.wait_take()
                if op == NULL:
                    return
            self.execute(op, pool_index)

    cdef int stop_pools(self) except -1:
        cdef size_t i
        for i in range(self.pools.size()):
            self.pools[i].request_stop()
        return 0

    def request_stop(self):
        """Let the workers exit once nothing is pending."""
        if self.generation != _fork_generation:
            return
        if self.counter.request_stop():
            self.stop_pools()

    # -- running and completing --------------------------------------------------------

    cdef int dispatch(self, MxOpr* op, int current_pool) except -1:
        # A wait marker has nothing to run: complete it here, which wakes the waiter.
        if op.kind == MX_OPR_WAIT:
            return self.complete(op, None, -1)
        # The worker that made `op` ready takes it itself on its next loop, so it need
        # not wake a sleeping colleague (that costs a futex call and a GIL hand-over).
        self.pools[op.pool].put(op, op.pool != current_pool)
        return 0

    cdef ErrorBox record_error(self, MxOpr* op, exc):
        box = ErrorBox(exc, _op_label(op))
        self.errors.append(box)
        return box

    cdef int execute(self, MxOpr* op, int current_pool) except -1:
        cdef ErrorBox box = None
        cdef ErrorBox inherited = None
        cdef AsyncCompletion completion
        cdef Var var
        cdef size_t i
        if op.kind != MX_OPR_DELETE:
            for i in range(op.writes.size()):
                var = <Var>op.writes[i]
                if var.error is not None and (<ErrorBox>var.error).exc is not None:
                    inherited = var.error
                    break
            if inherited is None:
                for i in range(op.reads.size()):
                    var = <Var>op.reads[i]
                    if var.error is not None and (<ErrorBox>var.error).exc is not None:
                        inherited = var.error
                        break
            if inherited is not None:
                # skipped: its outputs would be computed from a failed input
                return self.complete(op, inherited, current_pool)
        fn = <object>op.fn
        if op.kind == MX_OPR_ASYNC:
            completion = AsyncCompletion.__new__(AsyncCompletion)
            completion.core = self
            completion.op = op
            try:
                fn(completion)
            except BaseException as exc:
                if not completion.done:
                    completion(exc)
            return 0
        try:
            fn()
        except BaseException as exc:  # a failing op must never take its worker down
            box = self.record_error(op, exc)
        return self.complete(op, box, current_pool)

    cdef int complete(self, MxOpr* op, ErrorBox box, int current_pool) except -1:
        cdef vector[MxOpr*] ready
        cdef Var var
        cdef size_t i
        cdef int kind = op.kind
        cdef int handoff_pool = current_pool
        for i in range(op.reads.size()):
            (<Var>op.reads[i]).state.complete_read(ready)
        for i in range(op.writes.size()):
            var = <Var>op.writes[i]
            if box is not None and kind != MX_OPR_DELETE:
                var.error = box
            var.state.complete_write(ready)
        if kind == MX_OPR_WAIT:
            op.waiter.signal()
            op.waiter.release()
        # Python references go last: a __del__ they trigger may push to this engine.
        Py_XDECREF(op.fn)
        Py_XDECREF(op.name)
        for i in range(op.reads.size()):
            Py_DECREF(<object>op.reads[i])
        for i in range(op.writes.size()):
            Py_DECREF(<object>op.writes[i])
        del op
        for i in range(ready.size()):
            if mx_opr_release(ready[i]):
                # (ready[i] may be run and freed by another thread from here on)
                self.dispatch(ready[i], handoff_pool)
                handoff_pool = -1  # at most one hand-off without a wake-up per completion
        if kind != MX_OPR_WAIT and self.counter.done_one():
            self.stop_pools()
        return 0

    # -- waiting -----------------------------------------------------------------------

    def wait_pending_zero(self, double timeout=-1.0):
        """Wait (Ctrl-C-friendly) until nothing is pending; False if ``timeout`` s passed first."""
        cdef bint done = False
        cdef double waited = 0.0
        while True:
            with nogil:
                done = self.counter.wait_zero_ms(WAIT_SLICE_MS)
            if done:
                return True
            waited += WAIT_SLICE_MS / 1000.0
            if timeout >= 0 and waited >= timeout:
                return False
            PyErr_CheckSignals()

    def take_first_error(self):
        """Forget every recorded error; return (op name, exception) of the first, or None."""
        errors, self.errors = self.errors, []
        first = None
        for box in errors:
            if (<ErrorBox>box).exc is not None:
                if first is None:
                    first = ((<ErrorBox>box).op_name, (<ErrorBox>box).exc)
                (<ErrorBox>box).exc = None
        return first

    @property
    def pending(self):
        return self.counter.pending_count()


cdef class ThreadedEngine:
    """A threaded dependency engine.

    Parameters
    ----------
    name : str
        ``"threaded"`` (one pool shared by every device) or ``"threaded_per_device"``
        (a pool per device, plus a pool for operations pushed with ``priority > 0``).
    num_workers : int, optional
        Worker threads of the shared pool (``threaded``) or of each CPU device's pool;
        by default config ``cpu_workers`` (0: one per core).
    priority_workers : int
        Worker threads of the priority pool (``threaded_per_device`` only).
    gpu_workers : int
        Compute workers per GPU device (a separate pool of the same size takes copies).
    """

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

    def __dealloc__(self):
        # The workers hold the core; tell them to leave once their work is done.
        if self._core is not None and self._core.generation == _fork_generation:
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
                       "delete_var", MX_OPR_DELETE)
        var.deleted = True

    # -- pushing -----------------------------------------------------------------------

    def push(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False):
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
        """
        cdef int pool
        if type(priority) is not int:
            raise _errors.bad_priority(priority)
        if ctx is None and priority <= 0:
            pool = self._default_pool
        else:
            pool = self.pool_for(ctx, priority, copy)
        self.push_fast(fn, reads, writes, pool, priority, name, MX_OPR_SYNC)

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
        self.push_fast(fn, reads, writes, pool, priority, name, MX_OPR_ASYNC)

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
                       object name, int kind) except -1:
        cdef EngineCore core = self._core
        cdef vector[PyObject*] write_vars
        cdef vector[PyObject*] read_vars
        cdef PyObject* ptr
        cdef Var var
        cdef MxOpr* op
        cdef size_t i, j
        cdef int granted = 0
        cdef bint seen
        if core.closed or core.generation != _fork_generation:
            self._check_usable()
        if not PyCallable_Check(fn):
            raise _errors.bad_callable(fn, "push_async" if kind == MX_OPR_ASYNC else "push")
        if type(writes) is not tuple and type(writes) is not list:
            raise _errors.bad_var_list(writes, "writes")
        if type(reads) is not tuple and type(reads) is not list:
            raise _errors.bad_var_list(reads, "reads")
        for obj in writes:
            if type(obj) is not Var or (<Var>obj).core is not core:
                raise _errors.bad_var(obj, self.name)
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
                raise _errors.bad_var(obj, self.name)
            if (<Var>obj).deleted:
                raise _errors.deleted_var(obj)
            ptr = <PyObject*>obj
            seen = False
            for j in range(write_vars.size()):  # read and written: a write
                if write_vars[j] == ptr:
                    seen = True
                    break
            if not seen:
                for j in range(read_vars.size()):
                    if read_vars[j] == ptr:
                        seen = True
                        break
            if not seen:
                read_vars.push_back(ptr)

        op = new MxOpr()
        op.kind = kind
        op.pool = pool
        op.priority = priority
        Py_INCREF(fn)
        op.fn = <PyObject*>fn
        Py_INCREF(name)
        op.name = <PyObject*>name
        op.writes = write_vars
        op.reads = read_vars
        for i in range(write_vars.size()):
            Py_INCREF(<object>write_vars[i])
        for i in range(read_vars.size()):
            Py_INCREF(<object>read_vars[i])
        mx_opr_set_wait(op, <int>(write_vars.size() + read_vars.size()) + 1)
        core.counter.add()
        core.push_lock.lock()
        op.seq = core.next_seq
        core.next_seq += 1
        for i in range(write_vars.size()):
            if (<Var>write_vars[i]).state.append(op, True):
                granted += 1
        for i in range(read_vars.size()):
            if (<Var>read_vars[i]).state.append(op, False):
                granted += 1
        core.push_lock.unlock()
        if mx_opr_release_n(op, granted + 1):
            core.dispatch(op, -1)
        return 0

    # -- waiting -----------------------------------------------------------------------

    def wait_for_var(self, var_obj):
        """Wait until every operation pushed so far that writes ``var`` has completed.

        Raises
        ------
        EngineError
            If a write of ``var`` failed (or inherited a failure): the message names the
            failing operation and the original exception is chained. Reporting clears it.
        KeyboardInterrupt
            On Ctrl-C; the operations keep running.
        """
        cdef EngineCore core = self._core
        cdef MxWaiter* waiter
        cdef MxOpr* op
        cdef bint done = False
        cdef int granted
        cdef Var var = _checked_var(self, var_obj)
        if not var.state.readable_now():
            self._refuse_wait_on_worker("wait_for_var")
            waiter = new MxWaiter()
            op = new MxOpr()
            op.kind = MX_OPR_WAIT
            op.waiter = waiter
            op.pool = self._default_pool
            Py_INCREF(var)
            op.reads.push_back(<PyObject*>var)
            mx_opr_set_wait(op, 2)
            core.push_lock.lock()
            op.seq = core.next_seq
            core.next_seq += 1
            granted = 1 if var.state.append(op, False) else 0
            core.push_lock.unlock()
            if mx_opr_release_n(op, granted + 1):
                core.dispatch(op, -1)
            try:
                with nogil:
                    done = waiter.spin(_spin_rounds)
                while not done:
                    with nogil:
                        done = waiter.wait_ms(WAIT_SLICE_MS)
                    if done:
                        break
                    PyErr_CheckSignals()
            finally:
                waiter.release()
        box = var.error
        if box is not None and (<ErrorBox>box).exc is not None:
            exc = (<ErrorBox>box).exc
            (<ErrorBox>box).exc = None
            var.error = None
            raise _errors.operation_failed((<ErrorBox>box).op_name, exc) from exc

    def wait_all(self):
        """Wait until every pushed operation has completed.

        Raises
        ------
        EngineError
            For the first operation that failed since the last report (the list of
            failures is cleared, and so are the errors stored on vars).
        """
        self._refuse_wait_on_worker("wait_all")
        self._core.wait_pending_zero()
        first = self._core.take_first_error()
        if first is not None:
            raise _errors.operation_failed(first[0], first[1]) from first[1]

    def shutdown(self, timeout=None):
        """Refuse new pushes, wait up to ``timeout`` s (None: forever) for the pending
        ones, and stop the worker threads. Errors are not raised here."""
        core = self._core
        if core.closed or core.generation != _fork_generation:
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

    def _check_usable(self):
        if self._core.generation != _fork_generation:
            raise EngineError(
                "this engine was made before os.fork() and has no worker threads in the child "
                "process; use mxkit.engine.get() (a fresh engine) or mxkit.engine.create() here")
        if self._core.closed:
            raise EngineError("this engine was shut down; make a new one with mxkit.engine.create()")


    def _refuse_wait_on_worker(self, what):
        if getattr(_worker_state, "core", None) is self._core:
            raise EngineError(
                f"{what}() inside an operation running on this engine would wait for itself; "
                f"push the follow-up work with the right reads/writes instead")


cdef Var _checked_var(ThreadedEngine engine, object obj):
    if type(obj) is not Var or (<Var>obj).core is not engine._core:
        raise _errors.bad_var(obj, engine.name)
    if (<Var>obj).deleted:
        raise _errors.deleted_var(obj)
    if engine._core.generation != _fork_generation:
        engine._check_usable()
    return <Var>obj


cdef int _positive_int(value, str what) except -1:
    if type(value) is not int or value < 1:
        raise EngineError(f"{what} must be an int >= 1, got {value!r}")
    return value


cdef int _resolve_workers(value) except -1:
    if value is None:
        from mxkit.core import config

        value = config.get("cpu_workers")
        if value == 0:
            value = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return _positive_int(value, "num_workers")


# -- process life cycle ----------------------------------------------------------------

def _after_fork_in_child():
    global _fork_generation
    _fork_generation += 1
    # Keep the parent's engines alive forever: freeing them would touch mutexes that a
    # parent thread (absent here) may have held at the fork.
    _abandoned_in_child.extend(_live_cores)


def _drain_at_exit():
    """Interpreter exit: give pending operations ``engine_exit_timeout`` seconds to finish,
    then stop the workers (they are daemon threads, so exit never waits on a stuck one)."""
    try:
        from mxkit.core import config

        timeout = float(config.get("engine_exit_timeout"))
    except Exception:
        timeout = 10.0
    for core in list(_live_cores):
        if (<EngineCore>core).generation != _fork_generation:
            continue
        (<EngineCore>core).closed = True
        try:
            (<EngineCore>core).wait_pending_zero(timeout)
        except KeyboardInterrupt:
            pass
        (<EngineCore>core).request_stop()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_drain_at_exit)
