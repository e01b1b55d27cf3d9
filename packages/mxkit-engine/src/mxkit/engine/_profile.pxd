# The profiler's record buffers (C++ structs of _engine_core.h), shared by _core.pyx and
# _naive.pyx: the hot path appends C structs; take_records turns them into Python tuples
# only when the profiler collects them (mxkit.engine.profiler).

from cpython.ref cimport Py_DECREF, PyObject
from libcpp cimport bool as cbool
from libcpp.vector cimport vector


cdef extern from "_engine_core.h" nogil:
    cdef struct MxProfRecord:
        long long core, seq, t_push, t_start, t_end
        unsigned long tid
        PyObject* label
        PyObject* scope
        PyObject* device
        int kind, pool
        cbool named, failed
        size_t vars_begin
        int n_reads, n_writes

    cdef struct MxProfFlow:
        long long core, producer, consumer, var

    cdef cppclass MxProfBuffer:
        vector[MxProfRecord] ops
        vector[long long] var_ids
        vector[MxProfFlow] flows
        void add_flow(long long core, long long producer, long long consumer, long long var)
        void take(MxProfBuffer& out)

    long long mx_now_ns()


cdef inline object _owned(PyObject* ptr):
    # a reference the record owned, now held by the returned object only
    if ptr == NULL:
        return None
    obj = <object>ptr
    Py_DECREF(obj)
    return obj


cdef inline tuple take_records(MxProfBuffer* buffer):
    """(ops, flows) recorded so far as tuples (format in _core.pyx); the buffer is emptied."""
    cdef MxProfBuffer taken
    cdef MxProfRecord* rec
    cdef MxProfFlow* flow
    cdef size_t i, k
    buffer.take(taken)
    ops = []
    for i in range(taken.ops.size()):
        rec = &taken.ops[i]
        label = _owned(rec.label)
        if not rec.named:
            label = getattr(label, "__qualname__", None) or repr(label)
        scope = _owned(rec.scope)
        device = _owned(rec.device)
        reads = tuple([taken.var_ids[k] for k in range(rec.vars_begin, rec.vars_begin + rec.n_reads)])
        writes = tuple([taken.var_ids[k] for k in range(rec.vars_begin + rec.n_reads,
                                                         rec.vars_begin + rec.n_reads + rec.n_writes)])
        pool = rec.pool if device is None and rec.core >= 0 else (str(device) if device is not None else "cpu(0)")
        ops.append((rec.core, rec.seq, label, scope, rec.kind, pool, rec.t_push, rec.t_start, rec.t_end, rec.tid,
                    reads, writes, rec.failed))
    flows = []
    for i in range(taken.flows.size()):
        flow = &taken.flows[i]
        flows.append((flow.core, flow.producer, flow.consumer, flow.var))
    return ops, flows
