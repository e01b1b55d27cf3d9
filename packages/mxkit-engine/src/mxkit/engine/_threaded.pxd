# Declarations of the threaded engine, for other Cython code to ``cimport``:
#
#     from mxkit.engine._threaded cimport ThreadedEngine
#     from mxkit.engine._core cimport MX_OPR_SYNC
#     (<ThreadedEngine>eng).push_fast(fn, reads, writes, pool, priority, name, MX_OPR_SYNC, False)
#
# ``pool`` comes from ThreadedEngine.pool_for(ctx, priority, copy).

from mxkit.engine._core cimport EngineCore, Var


cdef class ThreadedEngine:
    cdef EngineCore _core
    cdef int _default_pool
    cdef int _priority_pool
    cdef object _last_ctx
    cdef int _last_pool
    cdef dict _pool_index
    cdef readonly str name
    cdef readonly int num_workers
    cdef readonly int priority_workers
    cdef int _gpu_workers
    cdef bint _per_device
    cdef object _inherited     # parent's var (made before os.fork()) -> this engine's stand-in

    cdef Var _adopt(self, object obj)

    cdef int push_fast(self, object fn, object reads, object writes, int pool, int priority,
                       object name, int kind, bint small) except -1
    cpdef int pool_for(self, object ctx, int priority, bint copy) except -1
