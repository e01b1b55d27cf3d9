# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""The naive engine, compiled: every operation runs at push, on the pushing thread.

MXNet's ``NaiveEngine``, for debugging: no worker threads, no queues, so a failing
operation raises at its push with the caller's stack intact, and a debugger steps
straight into it. An asynchronous operation is started at push and the push waits for
its ``on_complete``. Compiled only to keep a push close to the cost of calling ``fn``.
"""

import os
import threading
import weakref

from cpython.object cimport PyCallable_Check
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.ref cimport Py_INCREF, PyObject

from mxkit.core.context import Context
from mxkit.core.errors import EngineError

from mxkit.engine import _errors
from mxkit.engine._profile cimport MxProfBuffer, MxProfRecord, take_records

# How often a wait for an asynchronous completion wakes to let Ctrl-C through.
DEF WAIT_SLICE_S = 0.05

cdef long long _next_var_id = 0
# Bumped in a child process after os.fork(): tells the vars of the parent's engines apart.
cdef int _fork_generation = 0

from mxkit.engine._profile cimport mx_now_ns

# -- profiler hooks (mxkit.engine.profiler drives them; see _core.pyx for the format) ---
# Naive ops run at push, so push and start times are one, and nothing ever waits: there
# are no flow records. Records use core id -1 and pool -1 (labelled by the op's device).
cdef bint _profiling = False
cdef object _scope_local = None
cdef MxProfBuffer* _prof = new MxProfBuffer()
cdef long long _next_seq = 0


def _set_profiling(bint on, scope_local=None):
    """Start (True) or stop recording the ops pushed from now on (see _core._set_profiling)."""
    global _profiling, _scope_local
    _scope_local = scope_local
    _profiling = on


def _take_profile():
    """Return and forget the op records made so far, and an empty list of flows."""
    return take_records(_prof)


cdef int _add_var_ids(object vars, size_t skip_from) except -1:
    # appends the ids of `vars` not already among var_ids[skip_from:]; returns how many
    cdef size_t k, start = _prof.var_ids.size()
    cdef long long var_id
    cdef bint seen
    for var in vars:
        var_id = (<NaiveVar>var).id
        seen = False
        for k in range(skip_from, _prof.var_ids.size()):
            if _prof.var_ids[k] == var_id:
                seen = True
                break
        if not seen:
            _prof.var_ids.push_back(var_id)
    return <int>(_prof.var_ids.size() - start)


cdef int _record(object fn, object name, object ctx, object reads, object writes, long long t_start,
                 bint failed, int kind) except -1:
    global _next_seq
    cdef MxProfRecord rec
    cdef size_t begin = _prof.var_ids.size()
    cdef int n_writes = _add_var_ids(writes, begin)
    cdef int n_reads = _add_var_ids(reads, begin)  # a var read and written counts as written
    cdef size_t k
    # the record lists reads first: rotate the writes behind the reads
    for k in range(<size_t>n_writes):
        _prof.var_ids.push_back(_prof.var_ids[begin + k])
    _prof.var_ids.erase(_prof.var_ids.begin() + begin, _prof.var_ids.begin() + begin + n_writes)
    scope = getattr(_scope_local, "name", None) if _scope_local is not None else None
    label = name if name is not None else fn
    rec.core = -1
    rec.seq = _next_seq
    rec.t_push = t_start
    rec.t_start = t_start
    rec.t_end = mx_now_ns()
    rec.tid = PyThread_get_thread_ident()
    rec.named = name is not None
    Py_INCREF(label)
    rec.label = <PyObject*>label
    rec.scope = NULL
    if scope is not None:
        Py_INCREF(scope)
        rec.scope = <PyObject*>scope
    rec.device = NULL
    if ctx is not None:
        Py_INCREF(ctx)
        rec.device = <PyObject*>ctx
    rec.kind = kind
    rec.pool = -1
    rec.failed = failed
    rec.vars_begin = begin
    rec.n_reads = n_reads
    rec.n_writes = n_writes
    _prof.ops.push_back(rec)
    _next_seq += 1
    return 0


cdef class NaiveVar:
    """A variable of the naive engine: only a counter of completed writes.

    Attributes
    ----------
    version : int
        Number of completed write operations on this var.
    name : str or None
        The name given to :meth:`NaiveEngine.new_var` (for messages).
    """

    cdef readonly long long version
    cdef readonly object name
    cdef readonly long long id
    cdef object engine
    cdef object error          # (op name, exception) of the failed last write, or None
    cdef bint deleted
    cdef object __weakref__

    def __cinit__(self, engine, name=None):
        global _next_var_id
        self.engine = engine
        self.name = name
        self.id = _next_var_id
        _next_var_id += 1

    def __repr__(self):
        label = f" {self.name!r}" if self.name else ""
        return f"<naive var {self.id}{label} version={self.version}>"

    @property
    def made_before_fork(self):
        """True in a child process made by ``os.fork()`` for a var of the parent's engine."""
        return (<NaiveEngine>self.engine).generation != _fork_generation

    def error_at_fork(self):
        """``(op name, exception)`` that reading this var raises (its last write failed),
        or None; nothing is ever pending on the naive engine, so a fork adds no error."""
        return self.error


class _AsyncOutcome:
    """Whether and how an asynchronous operation completed (outlives its on_complete)."""

    __slots__ = ("done", "error")

    def __init__(self):
        self.done = threading.Event()
        self.error = None


class _AsyncCompletion:
    """The ``on_complete`` callable handed to an asynchronous operation."""

    __slots__ = ("__weakref__", "name", "outcome")

    def __init__(self, name, outcome):
        self.name = name
        self.outcome = outcome

    def __call__(self, error=None):
        if self.outcome.done.is_set():
            raise EngineError(f"on_complete of operation {self.name!r} was called twice; call it exactly once")
        if error is not None and not isinstance(error, BaseException):
            error = EngineError(f"operation {self.name!r} completed with on_complete({error!r}); "
                                f"pass an exception or nothing")
        self.outcome.error = error
        self.outcome.done.set()


cdef class NaiveEngine:
    """Runs each operation immediately on the caller's thread.

    Parameters
    ----------
    **options
        None are accepted; an unknown one raises :class:`~mxkit.core.errors.EngineError`.
    """

    cdef readonly str name
    cdef int generation        # fork generation this engine was made in
    cdef object _inherited     # parent's var (made before os.fork()) -> this engine's stand-in
    #: :meth:`push` takes ``small=`` (read on the type; every op runs inline here anyway)
    inline_small_ops = True

    def __init__(self, **options):
        if options:
            raise EngineError(f"the naive engine takes no options, got {sorted(options)}")
        self.name = "naive"
        self.generation = _fork_generation
        self._inherited = weakref.WeakKeyDictionary()

    # -- vars --------------------------------------------------------------------------

    def new_var(self, name=None):
        """Return a new variable (its ``version`` starts at 0)."""
        return NaiveVar(self, name)

    def delete_var(self, var, on_delete=None):
        """Delete ``var`` (at once: nothing is ever pending) and call ``on_delete()``."""
        cdef NaiveVar checked = self._checked(var)
        if on_delete is not None and not PyCallable_Check(on_delete):
            raise _errors.bad_callable(on_delete, "delete_var(on_delete=...)")
        checked.deleted = True
        cdef long long t_start = mx_now_ns() if _profiling else 0
        if on_delete is not None:
            try:
                on_delete()
            except Exception as exc:
                if t_start:
                    _record(on_delete, "delete_var", None, (), (var,), t_start, True, 3)
                _errors.raise_operation_error("delete_var", exc)
        if t_start:
            _record(on_delete, "delete_var", None, (), (var,), t_start, False, 3)

    # -- pushing -----------------------------------------------------------------------

    def push(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False, small=False):
        """Run ``fn()`` now; then count a completed write on every var in ``writes``.
        (``small`` is accepted for the threaded engines' sake: everything runs inline here.)

        Raises
        ------
        EngineError
            If ``fn`` raised (chained to the original exception), or an argument is wrong.
        """
        if not PyCallable_Check(fn):
            raise _errors.bad_callable(fn, "push")
        if self._check_args(reads, writes, ctx, priority):
            reads, writes = self._adopted(reads), self._adopted(writes)
        self._raise_inherited(reads, writes)
        if _profiling:
            self._run_profiled(fn, name, ctx, reads, writes)
            return
        try:
            fn()
        except Exception as exc:
            self._fail_writes(writes, name, exc)
            _errors.raise_operation_error(name, exc)
        self._count_writes(writes)

    def push_async(self, fn, reads=(), writes=(), ctx=None, priority=0, name=None, copy=False):
        """Start ``fn(on_complete)`` now and wait until it calls ``on_complete()``;
        ``on_complete(exc)`` reports a failure, raised here as an EngineError."""
        if not PyCallable_Check(fn):
            raise _errors.bad_callable(fn, "push_async")
        if self._check_args(reads, writes, ctx, priority):
            reads, writes = self._adopted(reads), self._adopted(writes)
        self._raise_inherited(reads, writes)
        cdef long long t_start = mx_now_ns() if _profiling else 0
        outcome = _AsyncOutcome()
        completion = _AsyncCompletion(name, outcome)
        still_held = weakref.ref(completion)
        try:
            fn(completion)
        except Exception as exc:
            if not outcome.done.is_set():
                completion(exc)
        del completion
        if not outcome.done.is_set() and still_held() is None:
            # on_complete was dropped without a call: nobody can ever complete the op
            outcome.error = EngineError(
                f"the on_complete of asynchronous operation {name!r} was dropped without being called; "
                f"an asynchronous operation must call on_complete() exactly once")
            outcome.done.set()
        while not outcome.done.wait(WAIT_SLICE_S):
            pass
        if t_start:
            _record(fn, name, ctx, reads, writes, t_start, outcome.error is not None, 1)
        if outcome.error is not None:
            self._fail_writes(writes, name, outcome.error)
            _errors.raise_operation_error(name, outcome.error)
        self._count_writes(writes)

    cdef int _run_profiled(self, fn, name, ctx, reads, writes) except -1:
        # push() while the profiler records (kept apart so that push() itself is unchanged)
        cdef long long t_start = mx_now_ns()
        try:
            fn()
        except Exception as exc:
            _record(fn, name, ctx, reads, writes, t_start, True, 0)
            self._fail_writes(writes, name, exc)
            _errors.raise_operation_error(name, exc)
        _record(fn, name, ctx, reads, writes, t_start, False, 0)
        self._count_writes(writes)
        return 0

    # -- waiting -----------------------------------------------------------------------

    def wait_for_var(self, var):
        """Nothing is ever pending on the naive engine: checks ``var``, and raises the
        error of its last write if that failed (until an operation overwrites ``var``)."""
        cdef NaiveVar checked = self._checked(var)
        if checked.error is not None:
            _errors.raise_operation_error(checked.error[0], checked.error[1])

    def wait_all(self):
        """Nothing is ever pending on the naive engine: returns at once (each failure was
        raised by its push; the failed outputs keep their errors)."""

    def shutdown(self, timeout=None):
        """Nothing to stop; later pushes still work (kept for interface symmetry)."""

    @property
    def pending(self):
        """Operations pushed and not yet complete (always 0 here)."""
        return 0


    def __repr__(self):
        return "<NaiveEngine>"

    # -- checks ------------------------------------------------------------------------

    cdef NaiveVar _checked(self, var):
        if type(var) is not NaiveVar or (<NaiveVar>var).engine is not self:
            var = self._adopt(var)
        if (<NaiveVar>var).deleted:
            raise _errors.deleted_var(var)
        return <NaiveVar>var

    cdef NaiveVar _adopt(self, var):
        """This engine's stand-in for ``var``, a var of an engine made before ``os.fork()``
        (e.g. the var of an NDArray that a DataLoader worker inherited); anything else is
        an EngineError. Made once per parent var, with the error reading it would raise."""
        if getattr(var, "made_before_fork", False) is not True:
            raise _errors.bad_var(var, self.name)
        adopted = self._inherited.get(var)
        if adopted is None:
            adopted = NaiveVar(self, var.name)
            (<NaiveVar>adopted).error = var.error_at_fork()
            self._inherited[var] = adopted
        return <NaiveVar>adopted

    cdef list _adopted(self, vars):
        # the vars of a push with each parent's var replaced by this engine's stand-in
        return [self._checked(var) for var in vars]

    cdef bint _check_args(self, reads, writes, ctx, priority) except -1:
        # True if some var is a parent's (made before os.fork()): see _adopted
        cdef bint inherited = False
        if type(reads) is not tuple and type(reads) is not list:
            raise _errors.bad_var_list(reads, "reads")
        if type(writes) is not tuple and type(writes) is not list:
            raise _errors.bad_var_list(writes, "writes")
        for var in reads:
            inherited |= self._checked(var) is not var
        for var in writes:
            inherited |= self._checked(var) is not var
        if ctx is not None and not isinstance(ctx, Context):
            raise EngineError(f"ctx must be an mxkit.core.Context or None, got {ctx!r}")
        if type(priority) is not int:
            raise _errors.bad_priority(priority)
        return inherited

    cdef int _count_writes(self, writes) except -1:
        # a var listed twice is written once; a successful write overwrote an old error
        cdef Py_ssize_t i, j, n = len(writes)
        cdef bint seen
        for i in range(n):
            seen = False
            for j in range(i):
                if writes[j] is writes[i]:
                    seen = True
                    break
            if not seen:
                (<NaiveVar>writes[i]).version += 1
                (<NaiveVar>writes[i]).error = None
        return 0

    cdef int _fail_writes(self, writes, name, exc) except -1:
        # the outputs of a failed op hold its error: reading them raises it again
        for var in writes:
            (<NaiveVar>var).error = (name, exc)
        return 0

    cdef int _raise_inherited(self, reads, writes) except -1:
        # An op reading a failed output (or updating one in place: listed in reads and
        # writes) is not run: its outputs take over the error, raised here as at its push.
        for var in reads:
            error = (<NaiveVar>var).error
            if error is not None:
                self._count_writes(writes)
                for out in writes:
                    (<NaiveVar>out).error = error
                _errors.raise_operation_error(error[0], error[1])
        return 0


def _after_fork_in_child():
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)
