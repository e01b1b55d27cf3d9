# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# distutils: language = c++
"""The core of the threaded engine: vars, dependency bookkeeping, worker loop, completion.

Bookkeeping lives in C++ structures (``_engine_core.h``) guarded by their own short
std::mutex sections, never by a Python lock: a push registers the operation on the
queue of every var it touches, and the operation is handed to a worker pool when its
wait counter (vars not yet granted, plus one for the push itself) reaches zero. Worker
threads are Python threads that wait for work with the GIL released and run the pushed
callables with it; callables that release the GIL (numpy, BLAS, I/O) run in parallel.
The user-facing engine (argument checks, device pools, waits) is in _threaded.pyx.
"""

import atexit
import os
import threading
import weakref

from cpython.pythread cimport PyThread_get_thread_ident
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from libcpp.vector cimport vector

from mxkit.core.errors import EngineError

from mxkit.engine import _errors
from mxkit.engine._profile cimport MxProfBuffer, MxProfRecord, take_records


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


# -- profiler hooks (mxkit.engine.profiler drives them) ---------------------------------
# One C flag read at each push; an op pushed while it is set carries `profiled` and is
# recorded once, at completion, as a C struct appended to _prof (with the GIL held, which
# every completion holds). _take_profile turns them into tuples (core id, seq, name,
# scope, kind, pool, t_push, t_start, t_end, thread ident, read var ids, write var ids,
# failed). A flow record (core id, producer seq, consumer seq, var id) says that the
# consumer waited for the producer's write of that var and was granted it by the
# producer's completion.
cdef bint _profiling = False
cdef object _scope_local = None
cdef MxProfBuffer* _prof = new MxProfBuffer()
cdef long long _next_core_id = 0
_pool_labels = {}     # (core id, pool index) -> label ("cpu0", "gpu0-copy", "priority")
_worker_names = {}    # thread ident -> thread name, for every engine worker ever started


def _set_profiling(bint on, scope_local=None):
    """Start (True) or stop recording the ops pushed from now on; ``scope_local`` is the
    ``threading.local`` whose ``name`` is the profiler scope of the pushing thread."""
    global _profiling, _scope_local
    _scope_local = scope_local
    _profiling = on


def _take_profile():
    """Return and forget the op and flow records made so far (two lists of tuples)."""
    return take_records(_prof)


def _noop():
    pass


def _set_spin_rounds(int rounds):
    """Tune how long wait_for_var spins before sleeping (benchmarks); returns the old value."""
    global _spin_rounds
    old, _spin_rounds = _spin_rounds, max(rounds, 0)
    return old


cdef class ErrorBox:
    """The error of a failed operation, shared by every var it (or an op that inherited
    it) wrote. It stays on those vars until a later operation overwrites them: every
    ``wait_for_var`` on them raises it, and every operation reading them is skipped and
    passes it on. ``wait_all`` raises a box no wait raised yet (``reported``), once, and
    leaves the vars as they are: no thread's wait can hide a failure from another
    thread's read."""

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

    @property
    def made_before_fork(self):
        """True in a child process made by ``os.fork()`` for a var of the parent's engine."""
        return not self.core.in_this_process()

    def error_at_fork(self):
        """For a var made before ``os.fork()``, read in the child: ``(op name, exception)``
        that reading it there must raise (its last write failed, or a write was still
        running or queued at the fork, so the child's copy of its data is undefined), or
        None when it was complete. The child's engine gives its stand-in var this state."""
        if self.error is not None:
            return ((<ErrorBox>self.error).op_name, (<ErrorBox>self.error).exc)
        if self.core.in_this_process():
            raise EngineError(f"{self!r} was made in this process, not before os.fork()")
        if self.state.write_pending_at_fork():
            return ("os.fork()", _errors.written_at_fork(self))
        return None

    def __repr__(self):
        label = f" {self.name!r}" if self.name is not None else ""
        return f"<engine var {self.id}{label} version={self.state.version}>"


cdef class AsyncCompletion:
    """The ``on_complete`` handed to an asynchronous operation: call it exactly once,
    with no argument on success or with the exception on failure, from any thread."""

    cdef EngineCore core
    cdef MxOpr* op             # freed by the completion: NULL from then on
    cdef bint done
    cdef object label          # the op's name, kept for a second call's message

    def __call__(self, exc=None):
        if self.done:
            raise EngineError(
                f"on_complete of engine operation {self.label!r} was called twice; call it exactly once")
        self.done = True
        cdef MxOpr* op = self.op
        cdef ErrorBox box = None
        self.label = _op_label(op)
        self.op = NULL
        if exc is not None:
            if not isinstance(exc, BaseException):
                exc = EngineError(f"operation {self.label!r} completed with on_complete({exc!r}); "
                                  f"pass an exception or nothing")
            box = self.core.record_error(op, exc)
        self.core.complete(op, box, -1)

    def __del__(self):
        # An on_complete dropped without being called would leave its op (and every op
        # after it on its vars) pending forever: fail the op instead.
        if not self.done and self.op != NULL and self.core.in_this_process():
            self(EngineError(
                f"the on_complete of asynchronous operation {_op_label(self.op)!r} was dropped without "
                f"being called; an asynchronous operation must call on_complete() exactly once"))

    @property
    def completed(self):
        """True once on_complete has been called."""
        return self.done


cdef inline object _inherited_error(MxOpr* op):
    # The error an op inherits: that of a var it reads, or of one it reads and writes.
    # Vars it only writes are overwritten whole, so their old error does not matter.
    # (The engine runs an op only once every earlier write of its vars is complete and
    # before any later one starts, so `error` read here is the one in push order.)
    cdef size_t i
    for i in range(op.reads.size()):
        box = (<Var>op.reads[i]).error
        if box is not None:
            return box
    for i in range(<size_t>op.n_rw):
        box = (<Var>op.writes[i]).error
        if box is not None:
            return box
    return None


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
        global _next_core_id
        self.pools.reserve(MAX_POOLS)
        self.errors = []
        self.threads = []
        self.generation = _fork_generation
        self.core_id = _next_core_id
        _next_core_id += 1
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
        _pool_labels[(self.core_id, index)] = label
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
        _worker_names[threading.get_ident()] = threading.current_thread().name
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

    # -- registering -------------------------------------------------------------------

    cdef int submit(self, object fn, vector[PyObject*]& write_vars, vector[PyObject*]& read_vars,
                    int n_rw, int pool, int priority, object name, int kind, bint small) except -1:
        """Register an operation on its (checked, de-duplicated) vars; dispatch it if ready.
        ``write_vars[:n_rw]`` are the writes the op also reads; ``small``: see register."""
        cdef MxOpr* op = new MxOpr()
        cdef size_t i
        if _profiling:
            op.profiled = True
            op.prof = new MxOprProfile()
            op.prof.t_push = mx_now_ns()
            if _scope_local is not None:
                scope = getattr(_scope_local, "name", None)
                if scope is not None:
                    Py_INCREF(scope)
                    op.prof.scope = <PyObject*>scope
        op.kind = kind
        op.pool = pool
        op.priority = priority
        op.n_rw = n_rw
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
        self.counter.add()
        return self.register(op, small and kind == MX_OPR_SYNC)

    cdef int register(self, MxOpr* op, bint small) except -1:
        """Queue ``op`` on its vars and dispatch it once every var is granted. A ``small``
        op (a synchronous one its pusher says takes microseconds) that is granted at once,
        while its pool has nothing ready, runs here on the pushing thread (run_inline)."""
        cdef int granted = 0
        cdef size_t i
        mx_opr_set_wait(op, <int>(op.writes.size() + op.reads.size()) + 1)
        # One global push order for every var, whichever thread pushes (no C++ lock is
        # ever held while Python runs, so taking this one with the GIL cannot deadlock).
        self.push_lock.lock()
        op.seq = self.next_seq
        self.next_seq += 1
        for i in range(op.writes.size()):
            if (<Var>op.writes[i]).state.append(op, True):
                granted += 1
        for i in range(op.reads.size()):
            if (<Var>op.reads[i]).state.append(op, False):
                granted += 1
        self.push_lock.unlock()
        if mx_opr_release_n(op, granted + 1):
            # (an op pushed while the profiler records runs on a worker: traces show the
            # engine's own threads; a pool with ready ops keeps their priority order)
            if small and not op.profiled and self.pools[op.pool].size() == 0:
                return self.run_inline(op)
            self.dispatch(op, -1)
        return 0

    cdef int run_inline(self, MxOpr* op) except -1:
        """Run a ready ``op`` on the calling thread, as a worker would (MXNet's naive fast path).

        Every var of ``op`` is granted, so no other operation can touch them until it
        completes: running it now, here, is one of the orders the engine allows, and its
        completion (errors kept on its outputs, later ops granted) is the worker's. It
        saves the hand-over to a worker thread and, when the caller then reads the result,
        the wake-up back: most of a small op's cost. While it runs the thread counts as
        one of the engine's own, so a wait inside it raises instead of waiting for itself;
        an op pushed from inside an operation (worker or inline) is queued, never nested."""
        if getattr(_worker_state, "core", None) is not None:
            return self.dispatch(op, -1)
        cdef Py_ssize_t failures_before = len(self.errors)
        _worker_state.core = self
        try:
            self.execute(op, -1)
        finally:
            _worker_state.core = None
        if len(self.errors) > failures_before:
            exc = (<ErrorBox>self.errors[len(self.errors) - 1]).exc
            if isinstance(exc, KeyboardInterrupt):
                # Ctrl-C landed in the op: it failed like any op (its outputs hold the
                # error), and the caller is interrupted as it would be outside the engine
                raise KeyboardInterrupt() from exc
        return 0

    cdef int wait_var(self, Var var) except -1:
        """Block until the writes of ``var`` pushed so far are done (Ctrl-C raises)."""
        cdef MxWaiter* waiter
        cdef MxOpr* op
        cdef bint done = False
        if var.state.readable_now():
            return 0
        if self.on_own_worker():
            raise EngineError(
                "wait_for_var() inside an operation running on this engine would wait for itself; "
                "push the follow-up work with the right reads/writes instead")
        # A read marker: it is granted once every earlier write is done, then wakes us.
        waiter = new MxWaiter()
        op = new MxOpr()
        op.kind = MX_OPR_WAIT
        op.waiter = waiter
        Py_INCREF(var)
        op.reads.push_back(<PyObject*>var)
        self.register(op, False)
        try:
            with nogil:
                done = waiter.spin(_spin_rounds)
            while not done:
                with nogil:
                    done = waiter.wait_ms(WAIT_SLICE_MS)
                if not done:
                    PyErr_CheckSignals()
        finally:
            waiter.release()
        return 0

    cdef bint in_this_process(self) noexcept:
        return self.generation == _fork_generation

    cdef bint on_own_worker(self):
        return getattr(_worker_state, "core", None) is self

    # -- running and completing --------------------------------------------------------

    cdef int dispatch(self, MxOpr* op, int current_pool) except -1:
        # A wait marker has nothing to run: complete it here, which wakes the waiter.
        if op.kind == MX_OPR_WAIT:
            return self.complete(op, None, -1)
        # The worker that made `op` ready takes it itself on its next loop, so it need
        # not wake a sleeping colleague (that costs a futex call and a GIL hand-over).
        self.pools[op.pool].put(op, op.pool != current_pool)
        return 0

    cdef int record_op(self, MxOpr* op, ErrorBox box) except -1:
        cdef MxProfRecord rec
        cdef size_t i
        rec.core = self.core_id
        rec.seq = op.seq
        rec.t_push = op.prof.t_push
        rec.t_start = op.prof.t_start
        rec.t_end = mx_now_ns()
        rec.tid = op.prof.tid
        rec.named = op.name != NULL and <object>op.name is not None
        rec.label = op.name if rec.named else op.fn  # the callable names an unnamed op later
        Py_INCREF(<object>rec.label)
        rec.scope = op.prof.scope  # the record takes over the op's reference
        del op.prof
        op.prof = NULL
        op.profiled = False
        rec.device = NULL
        rec.kind = op.kind
        rec.pool = op.pool
        rec.failed = box is not None
        rec.vars_begin = _prof.var_ids.size()
        rec.n_reads = op.reads.size()
        rec.n_writes = op.writes.size()
        for i in range(op.reads.size()):
            _prof.var_ids.push_back((<Var>op.reads[i]).id)
        for i in range(op.writes.size()):
            _prof.var_ids.push_back((<Var>op.writes[i]).id)
        _prof.ops.push_back(rec)
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
        if op.profiled:
            op.prof.t_start = mx_now_ns()
            op.prof.tid = PyThread_get_thread_ident()
        if op.kind != MX_OPR_DELETE:
            inherited = _inherited_error(op)
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
        cdef size_t i, j, granted_before
        cdef int kind = op.kind
        cdef int handoff_pool = current_pool
        cdef bint profiled = op.profiled
        for i in range(op.reads.size()):
            (<Var>op.reads[i]).state.complete_read(ready)
        for i in range(op.writes.size()):
            var = <Var>op.writes[i]
            if kind != MX_OPR_DELETE:
                # a failure (or an inherited one) poisons the outputs; a success
                # overwrote them, which clears an error they held
                var.error = box
            granted_before = ready.size()
            var.state.complete_write(ready)
            if profiled:
                # (the granted ops still wait for our release below: safe to read)
                for j in range(granted_before, ready.size()):
                    if ready[j].profiled:
                        _prof.add_flow(self.core_id, op.seq, ready[j].seq, var.id)
        if profiled:
            self.record_op(op, box)
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

    def take_unreported_errors(self):
        """The failures no wait has reported yet, in failure order, as a list of (op name,
        exception); they count as reported from now on. Vars keep their errors."""
        errors, self.errors = self.errors, []
        out = []
        for box in errors:
            if not (<ErrorBox>box).reported:
                (<ErrorBox>box).reported = True
                out.append(((<ErrorBox>box).op_name, (<ErrorBox>box).exc))
        return out

    cdef object var_error(self, Var var):
        """The ErrorBox ``var`` holds (its last write failed), or None; it counts as
        reported from now on (``wait_all`` will not raise it again)."""
        box = var.error
        if box is not None:
            (<ErrorBox>box).reported = True
        return box

    @property
    def pending(self):
        return self.counter.pending_count()


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
        try:
            # still open while it drains: pending operations may push their follow-ups
            (<EngineCore>core).wait_pending_zero(timeout)
        except KeyboardInterrupt:
            pass
        (<EngineCore>core).closed = True
        (<EngineCore>core).request_stop()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_drain_at_exit)
