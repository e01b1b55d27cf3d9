# Declarations of the threaded engine's core (the C++ state of _engine_core.h, vars and
# the bookkeeping class), for _threaded.pyx and other Cython code to ``cimport``.

from cpython.ref cimport PyObject
from libcpp cimport bool as cbool
from libcpp.vector cimport vector


cdef extern from "_engine_core.h" nogil:
    cdef cppclass MxWaiter:
        cbool wait_ms(int ms)
        cbool spin(int rounds)
        void signal()
        void release()

    cdef enum MxOprKind:
        MX_OPR_SYNC
        MX_OPR_ASYNC
        MX_OPR_WAIT
        MX_OPR_DELETE

    cdef cppclass MxOprProfile:
        long long t_push
        long long t_start
        unsigned long tid
        PyObject* scope

    cdef cppclass MxOpr:
        PyObject* fn
        PyObject* name
        vector[PyObject*] reads
        vector[PyObject*] writes
        int priority
        int n_rw
        long long seq
        int pool
        int kind
        MxWaiter* waiter
        cbool profiled
        MxOprProfile* prof

    cdef cppclass MxVarState:
        long long version
        cbool append(MxOpr* op, cbool is_write)
        cbool readable_now()
        void complete_read(vector[MxOpr*]& ready)
        void complete_write(vector[MxOpr*]& ready)
        size_t queued()
        cbool write_pending_at_fork()

    cdef cppclass MxPool:
        void put(MxOpr* op, cbool wake)
        MxOpr* try_take()
        MxOpr* wait_take()
        void request_stop()
        size_t size()

    cdef cppclass MxPendingCounter:
        void add()
        long long pending_count()
        cbool done_one()
        cbool wait_zero_ms(int ms)
        cbool request_stop()

    cdef cppclass MxPushLock:
        void lock()
        void unlock()

    int mx_opr_release(MxOpr* op)
    int mx_opr_release_n(MxOpr* op, int n)
    void mx_opr_set_wait(MxOpr* op, int n)
    long long mx_now_ns()


cdef class Var:
    cdef MxVarState* state
    cdef EngineCore core
    cdef object error          # an ErrorBox shared with the failing op's other vars, or None
    cdef readonly object name
    cdef readonly long long id
    cdef bint deleted
    cdef object __weakref__    # the memory profiler frees an NDArray's bytes when its var goes


cdef class ErrorBox:
    cdef public object exc     # the original exception
    cdef public object op_name
    cdef public bint reported  # raised by some wait: wait_all skips it (the vars keep it)



cdef class EngineCore:
    cdef vector[MxPool*] pools
    cdef MxPendingCounter counter
    cdef MxPushLock push_lock
    cdef long long next_seq
    cdef long long next_var_id
    cdef readonly long long core_id   # names this engine's tracks in a profile
    cdef int generation         # fork generation this engine was made in
    cdef bint closed
    cdef list errors            # ErrorBoxes in failure order, for wait_all()
    cdef list threads
    cdef object __weakref__

    cdef int submit(self, object fn, vector[PyObject*]& write_vars, vector[PyObject*]& read_vars,
                    int n_rw, int pool, int priority, object name, int kind, bint small) except -1
    cdef int register(self, MxOpr* op, bint small) except -1
    cdef int run_inline(self, MxOpr* op) except -1
    cdef int wait_var(self, Var var) except -1
    cdef bint in_this_process(self) noexcept
    cdef bint on_own_worker(self)
    cdef int dispatch(self, MxOpr* op, int current_pool) except -1
    cdef int execute(self, MxOpr* op, int current_pool) except -1
    cdef int complete(self, MxOpr* op, ErrorBox box, int current_pool) except -1
    cdef int stop_pools(self) except -1
    cdef ErrorBox record_error(self, MxOpr* op, exc)
    cdef int record_op(self, MxOpr* op, ErrorBox box) except -1
    cdef object var_error(self, Var var)
