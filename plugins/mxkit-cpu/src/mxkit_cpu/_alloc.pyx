# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3, binding=True
"""Bump allocation of small aligned arrays from shared slabs, in C.

A small operator's output costs more to allocate through numpy's Python-level
constructors (a lock, ``numpy.ndarray(shape, dtype, buffer, offset)``: about 2.5 µs here)
than its arithmetic. This module carves the array out of the current slab and builds the
ndarray header with the C API, its base being the slab, so the slab lives as long as any
array carved from it.

The offset is bumped without a lock: between reading and writing it nothing runs Python
code, so the GIL cannot change hands. Making a new slab calls Python (and may let another
thread in); the loop then simply looks at the slab again.
"""

cimport numpy as cnp
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.pyport cimport PY_SSIZE_T_MAX

import numpy as np

cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    # steals the reference to descr
    object PyArray_NewFromDescr(PyTypeObject* subtype, PyObject* descr, int nd, cnp.npy_intp* dims,
                                cnp.npy_intp* strides, void* data, int flags, PyObject* obj)

cnp.import_array()

cdef enum:
    MAX_DIMS = 64  # numpy 2's own limit

cdef object _slab = None  # the current slab: a uint8 ndarray whose data is ALIGNMENT-aligned
cdef char* _slab_data = NULL
cdef Py_ssize_t _slab_bytes = 0
cdef Py_ssize_t _offset = 0
cdef Py_ssize_t _alignment = 64
cdef object _new_slab = None  # Python callable: () -> aligned uint8 ndarray
cdef Py_ssize_t _small_limit = 0  # arrays of up to this many bytes: carved from the slab
cdef Py_ssize_t _pool_min = 0  # arrays of at least this many bytes: a recycled buffer of _pool_empty
cdef object _pool_empty = None  # Python callable: (nbytes) -> aligned, C-contiguous uint8 buffer (None: not configured)


def configure(Py_ssize_t alignment, new_slab, Py_ssize_t small_limit, Py_ssize_t pool_min, pool_empty):
    """Set the alignment (a power of two), the factory of new slabs, and :func:`backend_empty`'s routes:
    arrays of up to ``small_limit`` bytes come from the slab, arrays of at least ``pool_min`` bytes from
    ``pool_empty(nbytes)`` (an aligned, C-contiguous uint8 buffer)."""
    global _alignment, _new_slab, _slab, _slab_data, _slab_bytes, _offset, _small_limit, _pool_min, _pool_empty
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    if small_limit < 0 or pool_min <= small_limit:
        raise ValueError(f"the limits must satisfy 0 <= small_limit < pool_min, got {small_limit} and {pool_min}")
    _alignment = alignment
    _new_slab = new_slab
    _small_limit, _pool_min, _pool_empty = small_limit, pool_min, pool_empty
    _slab = None
    _slab_data = NULL
    _slab_bytes = 0
    _offset = 0


cdef inline void _install(cnp.ndarray slab):
    global _slab, _slab_data, _slab_bytes, _offset
    _slab = slab
    _slab_data = <char*> cnp.PyArray_DATA(slab)
    _slab_bytes = cnp.PyArray_NBYTES(slab)
    _offset = 0


cdef object _array_over(object owner, char* data, Py_ssize_t available, tuple shape, cnp.dtype dtype):
    """A C-contiguous array of ``shape`` and ``dtype`` over the ``available`` bytes at ``data``,
    kept alive by ``owner``."""
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef int ndim = len(shape)
    cdef int i
    cdef Py_ssize_t needed = dtype.itemsize
    cdef bint empty = False
    if ndim > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions are supported, got {ndim}")
    for i in range(ndim):
        dims[i] = shape[i]
        if dims[i] < 0:
            raise ValueError(f"negative dimensions are not allowed, got shape {shape}")
        empty = empty or dims[i] == 0
    # the callers size the memory from the shape; this guards the pointer handed to numpy (each
    # factor is checked against what is left, so the product cannot overflow on the way)
    for i in range(ndim):
        if empty:
            break
        if needed > available // dims[i]:
            raise ValueError(f"shape {shape} of {dtype} needs more than the {available} bytes there are")
        needed *= dims[i]
    if not empty and needed > available:  # (a 0-d array: one element)
        raise ValueError(f"shape {shape} of {dtype} needs {needed} bytes, {available} are there")
    Py_INCREF(dtype)  # PyArray_NewFromDescr steals a reference to the descriptor
    array = PyArray_NewFromDescr(&PyArray_Type, <PyObject*> dtype, ndim, dims, NULL, data,
                                 cnp.NPY_ARRAY_CARRAY, NULL)
    cnp.set_array_base(array, owner)
    return array


def small_empty(tuple shape, cnp.dtype dtype, Py_ssize_t count):
    """An uninitialised C-contiguous array of ``shape`` (``count`` elements) and ``dtype``
    carved from the current slab; the caller keeps it to arrays of at most a slab."""
    global _offset
    cdef Py_ssize_t nbytes = count * dtype.itemsize
    cdef Py_ssize_t rounded = (nbytes if nbytes > 0 else 1)
    cdef Py_ssize_t start
    cdef object owner
    cdef char* data
    if len(shape) > MAX_DIMS:  # (checked before the slab is bumped)
        raise ValueError(f"at most {MAX_DIMS} dimensions are supported, got {len(shape)}")
    rounded = (rounded + _alignment - 1) & ~(_alignment - 1)
    while True:
        start = _offset
        if _slab is not None and start + rounded <= _slab_bytes:
            _offset = start + rounded  # no Python ran since the read above: no other thread did either
            owner = _slab
            data = _slab_data + start
            break
        _install(_new_slab())
        if rounded > _slab_bytes:
            raise ValueError(f"{nbytes} bytes do not fit in a slab of {_slab_bytes} bytes")
    return _array_over(owner, data, rounded, shape, dtype)


def aligned_empty(tuple shape, cnp.dtype dtype, Py_ssize_t count):
    """An uninitialised C-contiguous array of ``shape`` (``count`` elements) and ``dtype`` whose
    data starts on an alignment boundary, in a buffer of its own (freed with the last array
    using it). numpy's Python-level route (an over-sized buffer, its address through ctypes, a
    slice, a view and a reshape) takes ~1.5 µs; this ~0.3."""
    cdef cnp.npy_intp nbytes = count * dtype.itemsize + _alignment
    raw = cnp.PyArray_EMPTY(1, &nbytes, cnp.NPY_UINT8, 0)
    cdef size_t start = <size_t> cnp.PyArray_DATA(raw)
    cdef size_t skip = (_alignment - (start & (_alignment - 1))) & (_alignment - 1)
    return _array_over(raw, <char*> cnp.PyArray_DATA(raw) + skip, nbytes - _alignment, shape, dtype)


def shaped(cnp.ndarray buffer, tuple shape, cnp.dtype dtype):
    """The memory of ``buffer`` (a C-contiguous array of at least the bytes needed) as an array of
    ``shape`` and ``dtype``: ``buffer.view(dtype).reshape(shape)`` without its two Python calls.
    Its base is ``buffer``'s owner, as numpy's views have it."""
    if not cnp.PyArray_IS_C_CONTIGUOUS(buffer):
        raise ValueError("the buffer must be C-contiguous")
    return _array_over(buffer, <char*> cnp.PyArray_DATA(buffer), cnp.PyArray_NBYTES(buffer), shape, dtype)


def address(cnp.ndarray array):
    """The address of ``array``'s data (``array.ctypes.data`` makes a ctypes object: ~1 µs, this ~0.05)."""
    return <size_t>cnp.PyArray_DATA(array)


def backend_empty(self, shape, dtype):
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` whose data starts on an alignment
    boundary: carved from the slab (:func:`small_empty`) up to the small limit, a recycled buffer of the pool
    from the pool's limit on (:func:`shaped`), a buffer of its own between (:func:`aligned_empty`).

    ``CPUBackend.empty`` itself (``self`` is the backend, unused), so that the route is chosen in C: in Python
    the dtype check, the product of the shape and the choice took more than the allocation. A negative
    dimension, or a size past ``Py_ssize_t``, raises ValueError."""
    cdef Py_ssize_t count = 1, dim, nbytes
    cdef cnp.dtype descr
    if _pool_empty is None:
        raise RuntimeError("mxkit_cpu._alloc.configure was not called")
    descr = dtype if isinstance(dtype, cnp.dtype) else np.dtype(dtype)
    if type(shape) is not tuple:
        shape = tuple(shape)
    for extent in <tuple>shape:
        dim = extent
        if dim < 0:
            raise ValueError(f"negative dimensions are not allowed, got shape {shape}")
        if dim and count > PY_SSIZE_T_MAX // dim:
            raise ValueError(f"shape {shape} has more elements than this machine can address")
        count *= dim
    if descr.itemsize and count > PY_SSIZE_T_MAX // descr.itemsize:
        raise ValueError(f"shape {shape} of {descr} needs more bytes than this machine can address")
    nbytes = count * descr.itemsize
    if nbytes <= _small_limit:
        return small_empty(shape, descr, count)
    if nbytes >= _pool_min:
        return shaped(_pool_empty(nbytes), shape, descr)
    return aligned_empty(shape, descr, count)
