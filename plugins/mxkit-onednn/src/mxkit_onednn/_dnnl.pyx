# cython: boundscheck=False, wraparound=False
"""A thin typed layer over oneDNN's C API: memory descriptors, primitives with a
user-managed scratchpad, and the primitive descriptors the kernels of this plugin need.

Everything here is mechanism; which primitive serves which mxkit operator, and how shapes
map onto oneDNN's dims, is decided in Python (:mod:`mxkit_onednn.conv` and siblings).
"""

import threading

import numpy as np

cimport numpy as cnp
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uintptr_t

cnp.import_array()


cdef extern from "oneapi/dnnl/dnnl.h" nogil:
    ctypedef int dnnl_status_t
    ctypedef int64_t dnnl_dim_t
    ctypedef dnnl_dim_t dnnl_dims_t[12]
    ctypedef struct dnnl_memory_desc:
        pass
    ctypedef dnnl_memory_desc* dnnl_memory_desc_t
    ctypedef const dnnl_memory_desc* const_dnnl_memory_desc_t
    ctypedef struct dnnl_engine:
        pass
    ctypedef dnnl_engine* dnnl_engine_t
    ctypedef struct dnnl_stream:
        pass
    ctypedef dnnl_stream* dnnl_stream_t
    ctypedef struct dnnl_memory:
        pass
    ctypedef dnnl_memory* dnnl_memory_t
    ctypedef struct dnnl_primitive_desc:
        pass
    ctypedef dnnl_primitive_desc* dnnl_primitive_desc_t
    ctypedef const dnnl_primitive_desc* const_dnnl_primitive_desc_t
    ctypedef struct dnnl_primitive:
        pass
    ctypedef dnnl_primitive* dnnl_primitive_t
    ctypedef const dnnl_primitive* const_dnnl_primitive_t
    ctypedef struct dnnl_primitive_attr:
        pass
    ctypedef dnnl_primitive_attr* dnnl_primitive_attr_t
    ctypedef const dnnl_primitive_attr* const_dnnl_primitive_attr_t
    ctypedef struct dnnl_post_ops:
        pass
    ctypedef dnnl_post_ops* dnnl_post_ops_t
    ctypedef const dnnl_post_ops* const_dnnl_post_ops_t
    ctypedef struct dnnl_exec_arg_t:
        int arg
        dnnl_memory_t memory

    int dnnl_success
    ctypedef int dnnl_data_type_t
    ctypedef int dnnl_format_tag_t
    ctypedef int dnnl_prop_kind_t
    ctypedef int dnnl_alg_kind_t
    ctypedef int dnnl_query_t
    ctypedef int dnnl_engine_kind_t
    ctypedef int dnnl_scratchpad_mode_t

    int dnnl_f32
    int dnnl_format_tag_any
    int dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde
    int dnnl_ba, dnnl_bac, dnnl_bacd, dnnl_acbd, dnnl_acbde, dnnl_acdb, dnnl_aBcd8b, dnnl_aBcd16b
    int dnnl_cpu
    int dnnl_stream_default_flags
    int dnnl_scratchpad_mode_user
    int dnnl_query_src_md, dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_weights_md
    int dnnl_query_dst_md, dnnl_query_diff_dst_md, dnnl_query_workspace_md, dnnl_query_scratchpad_md
    int dnnl_query_impl_info_str
    int dnnl_eltwise_relu_use_dst_for_bwd, dnnl_eltwise_tanh_use_dst_for_bwd, dnnl_eltwise_logistic_use_dst_for_bwd
    int dnnl_softmax_accurate, dnnl_softmax_log
    int dnnl_lrn_across_channels, dnnl_deconvolution_direct
    int dnnl_eltwise_relu, dnnl_binary_add

    dnnl_status_t dnnl_engine_create(dnnl_engine_t* engine, dnnl_engine_kind_t kind, size_t index)
    dnnl_status_t dnnl_stream_create(dnnl_stream_t* stream, dnnl_engine_t engine, unsigned flags)
    dnnl_status_t dnnl_stream_wait(dnnl_stream_t stream)
    dnnl_status_t dnnl_stream_destroy(dnnl_stream_t stream)

    dnnl_status_t dnnl_memory_desc_create_with_tag(dnnl_memory_desc_t* md, int ndims, const dnnl_dims_t dims,
                                                   dnnl_data_type_t data_type, dnnl_format_tag_t tag)
    dnnl_status_t dnnl_memory_desc_clone(dnnl_memory_desc_t* md, const_dnnl_memory_desc_t existing)
    dnnl_status_t dnnl_memory_desc_destroy(dnnl_memory_desc_t md)
    int dnnl_memory_desc_equal(const_dnnl_memory_desc_t lhs, const_dnnl_memory_desc_t rhs)
    size_t dnnl_memory_desc_get_size(const_dnnl_memory_desc_t md)

    dnnl_status_t dnnl_memory_create(dnnl_memory_t* memory, const_dnnl_memory_desc_t md, dnnl_engine_t engine,
                                     void* handle)
    dnnl_status_t dnnl_memory_set_data_handle(dnnl_memory_t memory, void* handle)
    dnnl_status_t dnnl_memory_destroy(dnnl_memory_t memory)

    dnnl_status_t dnnl_primitive_attr_create(dnnl_primitive_attr_t* attr)
    dnnl_status_t dnnl_primitive_attr_destroy(dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_primitive_attr_set_scratchpad_mode(dnnl_primitive_attr_t attr, dnnl_scratchpad_mode_t mode)
    dnnl_status_t dnnl_primitive_attr_set_post_ops(dnnl_primitive_attr_t attr, const_dnnl_post_ops_t post_ops)
    dnnl_status_t dnnl_post_ops_create(dnnl_post_ops_t* post_ops)
    dnnl_status_t dnnl_post_ops_destroy(dnnl_post_ops_t post_ops)
    dnnl_status_t dnnl_post_ops_append_eltwise(dnnl_post_ops_t post_ops, dnnl_alg_kind_t alg_kind, float alpha,
                                               float beta)
    dnnl_status_t dnnl_post_ops_append_binary(dnnl_post_ops_t post_ops, dnnl_alg_kind_t alg_kind,
                                              const_dnnl_memory_desc_t src1_desc)

    const_dnnl_memory_desc_t dnnl_primitive_desc_query_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what,
                                                          int index)
    dnnl_status_t dnnl_primitive_desc_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index,
                                            void* result)
    dnnl_status_t dnnl_primitive_desc_destroy(dnnl_primitive_desc_t pd)
    dnnl_status_t dnnl_primitive_create(dnnl_primitive_t* primitive, const_dnnl_primitive_desc_t pd)
    dnnl_status_t dnnl_primitive_destroy(dnnl_primitive_t primitive)
    dnnl_status_t dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,
                                         const dnnl_exec_arg_t* args)

    dnnl_status_t dnnl_reorder_primitive_desc_create(dnnl_primitive_desc_t* pd, const_dnnl_memory_desc_t src_desc,
                                                     dnnl_engine_t src_engine, const_dnnl_memory_desc_t dst_desc,
                                                     dnnl_engine_t dst_engine, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_convolution_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t weights_desc,
        const_dnnl_memory_desc_t bias_desc, const_dnnl_memory_desc_t dst_desc, const dnnl_dims_t strides,
        const dnnl_dims_t dilates, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_convolution_backward_data_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t weights_desc,
        const_dnnl_memory_desc_t diff_dst_desc, const dnnl_dims_t strides, const dnnl_dims_t dilates,
        const dnnl_dims_t padding_l, const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_convolution_backward_weights_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t diff_weights_desc,
        const_dnnl_memory_desc_t diff_bias_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t padding_l,
        const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_deconvolution_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t weights_desc,
        const_dnnl_memory_desc_t bias_desc, const_dnnl_memory_desc_t dst_desc, const dnnl_dims_t strides,
        const dnnl_dims_t dilates, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_deconvolution_backward_data_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t weights_desc,
        const_dnnl_memory_desc_t diff_dst_desc, const dnnl_dims_t strides, const dnnl_dims_t dilates,
        const dnnl_dims_t padding_l, const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_deconvolution_backward_weights_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t diff_weights_desc,
        const_dnnl_memory_desc_t diff_bias_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t padding_l,
        const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_lrn_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t dst_desc, dnnl_dim_t local_size, float alpha,
        float beta, float k, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_lrn_backward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const_dnnl_memory_desc_t src_desc, dnnl_dim_t local_size, float alpha, float beta, float k,
        const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_sum_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const_dnnl_memory_desc_t dst_desc, int n,
        const float* scales, const_dnnl_memory_desc_t* src_descs, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_concat_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const_dnnl_memory_desc_t dst_desc, int n,
        int concat_dimension, const_dnnl_memory_desc_t* src_descs, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_pooling_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t dst_desc, const dnnl_dims_t strides,
        const dnnl_dims_t kernel, const dnnl_dims_t dilation, const dnnl_dims_t padding_l,
        const dnnl_dims_t padding_r, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_pooling_backward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t diff_dst_desc, const dnnl_dims_t strides,
        const dnnl_dims_t kernel, const dnnl_dims_t dilation, const dnnl_dims_t padding_l,
        const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_batch_normalization_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t dst_desc, float epsilon, unsigned flags,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_batch_normalization_backward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const_dnnl_memory_desc_t src_desc, float epsilon, unsigned flags, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_eltwise_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t dst_desc, float alpha, float beta,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_eltwise_backward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const_dnnl_memory_desc_t data_desc, float alpha, float beta, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_softmax_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t dst_desc, int softmax_axis,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_softmax_backward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_alg_kind_t alg_kind,
        const_dnnl_memory_desc_t diff_src_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const_dnnl_memory_desc_t dst_desc, int softmax_axis, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_inner_product_backward_data_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const_dnnl_memory_desc_t diff_src_desc,
        const_dnnl_memory_desc_t weights_desc, const_dnnl_memory_desc_t diff_dst_desc,
        const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_inner_product_backward_weights_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const_dnnl_memory_desc_t src_desc,
        const_dnnl_memory_desc_t diff_weights_desc, const_dnnl_memory_desc_t diff_bias_desc,
        const_dnnl_memory_desc_t diff_dst_desc, const_dnnl_primitive_desc_t hint_fwd_pd,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_matmul_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, const_dnnl_memory_desc_t src_desc,
        const_dnnl_memory_desc_t weights_desc, const_dnnl_memory_desc_t bias_desc, const_dnnl_memory_desc_t dst_desc,
        const_dnnl_primitive_attr_t attr)
    dnnl_status_t dnnl_inner_product_forward_primitive_desc_create(
        dnnl_primitive_desc_t* pd, dnnl_engine_t engine, dnnl_prop_kind_t prop_kind,
        const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t weights_desc,
        const_dnnl_memory_desc_t bias_desc, const_dnnl_memory_desc_t dst_desc, const_dnnl_primitive_attr_t attr)


class DnnlError(RuntimeError):
    """oneDNN refused a call (its status code is in the message)."""


cdef inline void check(dnnl_status_t status, str what) except *:
    if status != dnnl_success:
        raise DnnlError(f"oneDNN {what} failed with status {status}")


cdef dnnl_engine_t _engine = NULL
check(dnnl_engine_create(&_engine, <dnnl_engine_kind_t>dnnl_cpu, 0), "engine creation")

#: oneDNN argument indices (DNNL_ARG_*)
ARG_SRC = 1
ARG_DST = 17
ARG_WEIGHTS = 33
ARG_BIAS = 41
ARG_MEAN = 49
ARG_VARIANCE = 50
ARG_SCALE = 51
ARG_SHIFT = 52
ARG_WORKSPACE = 64
ARG_SCRATCHPAD = 80
#: the i-th source of a sum or a concatenation is ARG_MULTIPLE_SRC + i
ARG_MULTIPLE_SRC = 1024
ARG_DIFF_SRC = 129
ARG_DIFF_DST = 145
ARG_DIFF_WEIGHTS = 161
ARG_DIFF_BIAS = 169
ARG_DIFF_SCALE = 255
ARG_DIFF_SHIFT = 256

#: prop kinds, algorithms and flags
FORWARD_TRAINING = 64
FORWARD_INFERENCE = 96
BACKWARD = 128
BACKWARD_DATA = 160
CONVOLUTION_DIRECT = 0x1
POOLING_MAX = 0x1ff
POOLING_AVG_INCLUDE_PADDING = 0x2ff
POOLING_AVG_EXCLUDE_PADDING = 0x3ff
# taken from the header: their values follow from an enum's order
ELTWISE_RELU_USE_DST = dnnl_eltwise_relu_use_dst_for_bwd
ELTWISE_TANH_USE_DST = dnnl_eltwise_tanh_use_dst_for_bwd
ELTWISE_LOGISTIC_USE_DST = dnnl_eltwise_logistic_use_dst_for_bwd
SOFTMAX_ACCURATE = dnnl_softmax_accurate
SOFTMAX_LOG = dnnl_softmax_log
LRN_ACROSS_CHANNELS = dnnl_lrn_across_channels
DECONVOLUTION_DIRECT = dnnl_deconvolution_direct
ELTWISE_RELU = dnnl_eltwise_relu
BINARY_ADD = dnnl_binary_add


def ARG_POST_OP_SRC_1(int index):
    """The argument of the second source of the binary post-op at ``index`` among a primitive's post-ops
    (DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1)."""
    return 32768 * (index + 1) | 2


USE_GLOBAL_STATS = 0x1
USE_SCALE = 0x2
USE_SHIFT = 0x4

#: numpy's default alignment is 16 bytes; oneDNN's kernels prefer 64 (one cache line)
ALIGNMENT = 64


cdef class Stream:
    """One oneDNN CPU stream (not shared between threads: see :func:`thread_stream`)."""
    cdef dnnl_stream_t stream

    def __cinit__(self):
        check(dnnl_stream_create(&self.stream, _engine, <unsigned>dnnl_stream_default_flags), "stream creation")

    def __dealloc__(self):
        if self.stream != NULL:
            dnnl_stream_destroy(self.stream)


_local = threading.local()


def thread_stream():
    """This thread's stream (streams are not meant to be used from two threads at once)."""
    stream = getattr(_local, "stream", None)
    if stream is None:
        stream = _local.stream = Stream()
    return stream


cdef class MemoryDesc:
    """An owned ``dnnl_memory_desc_t``."""
    cdef dnnl_memory_desc_t md

    def __dealloc__(self):
        if self.md != NULL:
            dnnl_memory_desc_destroy(self.md)

    @property
    def nbytes(self):
        return dnnl_memory_desc_get_size(self.md)

    def same_as(self, MemoryDesc other):
        """Whether both describe the same layout."""
        return bool(dnnl_memory_desc_equal(self.md, other.md))


cdef MemoryDesc _wrap_clone(const_dnnl_memory_desc_t md):
    cdef MemoryDesc result = MemoryDesc()
    check(dnnl_memory_desc_clone(&result.md, md), "memory descriptor clone")
    return result


cdef int _plain_tag(int ndims) except -1:
    if ndims == 1:
        return dnnl_a
    if ndims == 2:
        return dnnl_ab
    if ndims == 3:
        return dnnl_abc
    if ndims == 4:
        return dnnl_abcd
    if ndims == 5:
        return dnnl_abcde
    raise ValueError(f"oneDNN layouts of {ndims} dimensions are not used here")


cdef void _fill_dims(dnnl_dims_t target, values):
    cdef int i
    for i in range(len(values)):
        target[i] = <dnnl_dim_t>values[i]


def plain_md(dims):
    """A float32 memory descriptor of ``dims`` in row-major (numpy C) order."""
    cdef dnnl_dims_t c_dims
    cdef MemoryDesc result = MemoryDesc()
    _fill_dims(c_dims, dims)
    check(dnnl_memory_desc_create_with_tag(&result.md, len(dims), c_dims, <dnnl_data_type_t>dnnl_f32,
                                           <dnnl_format_tag_t>_plain_tag(len(dims))), "memory descriptor")
    return result


#: the layouts :func:`tagged_md` knows, by oneDNN's format tag names (letters: the dims in memory order;
#: a capital one blocked by the number after the last: ``aBcd8b`` is nChw8c)
_TAGS = {"ba": dnnl_ba, "bac": dnnl_bac, "bacd": dnnl_bacd, "acbd": dnnl_acbd, "acbde": dnnl_acbde,
         "acdb": dnnl_acdb, "aBcd8b": dnnl_aBcd8b, "aBcd16b": dnnl_aBcd16b}
_TAG_DIMS = {"ba": 2, "bac": 3, "bacd": 4, "acbd": 4, "acbde": 5, "acdb": 4, "aBcd8b": 4, "aBcd16b": 4}


def tagged_md(dims, tag):
    """A float32 memory descriptor of ``dims`` in the layout of oneDNN format tag ``tag`` (``"bacd"``: the
    second dimension outermost, then the first...; one of :data:`_TAGS`)."""
    cdef dnnl_dims_t c_dims
    cdef MemoryDesc result = MemoryDesc()
    if _TAG_DIMS.get(tag) != len(dims):
        raise ValueError(f"no layout {tag!r} of {len(dims)} dimensions here")
    _fill_dims(c_dims, dims)
    check(dnnl_memory_desc_create_with_tag(&result.md, len(dims), c_dims, <dnnl_data_type_t>dnnl_f32,
                                           <dnnl_format_tag_t>_TAGS[tag]), "memory descriptor")
    return result


def any_md(dims):
    """A float32 memory descriptor of ``dims`` whose layout the primitive chooses."""
    cdef dnnl_dims_t c_dims
    cdef MemoryDesc result = MemoryDesc()
    _fill_dims(c_dims, dims)
    check(dnnl_memory_desc_create_with_tag(&result.md, len(dims), c_dims, <dnnl_data_type_t>dnnl_f32,
                                           <dnnl_format_tag_t>dnnl_format_tag_any), "memory descriptor")
    return result


def aligned_buffer(size_t nbytes):
    """A zeroed byte array of ``nbytes`` that starts on a 64-byte boundary."""
    raw = np.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset:offset + nbytes]


cdef class PrimitiveDesc:
    """An owned ``dnnl_primitive_desc_t`` created with a user-managed scratchpad."""
    cdef dnnl_primitive_desc_t pd

    def __dealloc__(self):
        if self.pd != NULL:
            dnnl_primitive_desc_destroy(self.pd)

    def md(self, what):
        """The memory descriptor the primitive chose for ``what`` (``"src"``, ``"weights"``...), or None."""
        cdef const_dnnl_memory_desc_t md = dnnl_primitive_desc_query_md(self.pd, _QUERIES[what], 0)
        if md == NULL:
            return None
        return _wrap_clone(md)

    @property
    def implementation(self):
        """oneDNN's name of the implementation it picked (``jit:avx512_core``, ``gemm:jit``...)."""
        cdef const char* name = NULL
        check(dnnl_primitive_desc_query(self.pd, <dnnl_query_t>dnnl_query_impl_info_str, 0, &name), "query")
        return name.decode() if name != NULL else ""


_QUERIES = {
    "src": dnnl_query_src_md, "diff_src": dnnl_query_diff_src_md, "weights": dnnl_query_weights_md,
    "diff_weights": dnnl_query_diff_weights_md, "dst": dnnl_query_dst_md, "diff_dst": dnnl_query_diff_dst_md,
    "workspace": dnnl_query_workspace_md, "scratchpad": dnnl_query_scratchpad_md,
}


cdef class _Attr:
    cdef dnnl_primitive_attr_t attr

    def __cinit__(self):
        check(dnnl_primitive_attr_create(&self.attr), "attribute creation")
        check(dnnl_primitive_attr_set_scratchpad_mode(self.attr, <dnnl_scratchpad_mode_t>dnnl_scratchpad_mode_user),
              "scratchpad mode")

    def __dealloc__(self):
        if self.attr != NULL:
            dnnl_primitive_attr_destroy(self.attr)

    cdef set_post_ops(self, post_ops):
        """Operations applied to a primitive's result before it is written: ``("relu",)`` (an eltwise relu) or
        ``("add", md)`` (a binary add of a second array of layout ``md``), in order."""
        cdef dnnl_post_ops_t ops
        if not post_ops:
            return
        check(dnnl_post_ops_create(&ops), "post-ops creation")
        try:
            for op in post_ops:
                if op[0] == "relu":
                    check(dnnl_post_ops_append_eltwise(ops, <dnnl_alg_kind_t>dnnl_eltwise_relu, 0.0, 0.0),
                          "relu post-op")
                elif op[0] == "add":
                    check(dnnl_post_ops_append_binary(ops, <dnnl_alg_kind_t>dnnl_binary_add, (<MemoryDesc>op[1]).md),
                          "add post-op")
                else:
                    raise ValueError(f"unknown post-op {op[0]!r}: 'relu' or 'add'")
            # the attribute keeps its own copy of the post-ops
            check(dnnl_primitive_attr_set_post_ops(self.attr, ops), "post-ops")
        finally:
            dnnl_post_ops_destroy(ops)


cdef inline const_dnnl_memory_desc_t _md_or_null(object md):
    return NULL if md is None else (<MemoryDesc>md).md


cdef inline const_dnnl_primitive_desc_t _pd_or_null(object pd):
    return NULL if pd is None else (<PrimitiveDesc>pd).pd


def reorder_pd(MemoryDesc src, MemoryDesc dst):
    """A reorder from layout ``src`` to layout ``dst`` (same dims)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_reorder_primitive_desc_create(&result.pd, src.md, _engine, dst.md, _engine, attr.attr), "reorder")
    return result


def convolution_forward_pd(int prop_kind, MemoryDesc src, MemoryDesc weights, bias, MemoryDesc dst,
                           strides, dilates, pad_l, pad_r, post_ops=()):
    """A direct convolution; ``dilates`` count the gaps oneDNN's way (MXNet's dilate minus one); ``post_ops``
    as :meth:`_Attr.set_post_ops` takes them (the second source of the i-th, an ``add``, is bound as
    ``ARG_POST_OP_SRC_1(i)``)."""
    cdef _Attr attr = _Attr()
    attr.set_post_ops(post_ops)
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_convolution_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>CONVOLUTION_DIRECT, src.md, weights.md,
        _md_or_null(bias), dst.md, c_strides, c_dilates, c_pad_l, c_pad_r, attr.attr), "convolution forward")
    return result


def convolution_backward_data_pd(MemoryDesc diff_src, MemoryDesc weights, MemoryDesc diff_dst, strides, dilates,
                                 pad_l, pad_r, PrimitiveDesc hint):
    """The data gradient of a convolution (``hint``: the forward it belongs to)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_convolution_backward_data_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>CONVOLUTION_DIRECT, diff_src.md, weights.md, diff_dst.md, c_strides,
        c_dilates, c_pad_l, c_pad_r, hint.pd, attr.attr), "convolution backward data")
    return result


def convolution_backward_weights_pd(MemoryDesc src, MemoryDesc diff_weights, diff_bias, MemoryDesc diff_dst,
                                    strides, dilates, pad_l, pad_r, PrimitiveDesc hint):
    """The weight (and bias) gradient of a convolution."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_convolution_backward_weights_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>CONVOLUTION_DIRECT, src.md, diff_weights.md, _md_or_null(diff_bias),
        diff_dst.md, c_strides, c_dilates, c_pad_l, c_pad_r, hint.pd, attr.attr), "convolution backward weights")
    return result


def deconvolution_forward_pd(int prop_kind, MemoryDesc src, MemoryDesc weights, bias, MemoryDesc dst,
                             strides, dilates, pad_l, pad_r):
    """A direct deconvolution (the adjoint of a convolution; weights (groups,) out, in channels, window)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_deconvolution_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>DECONVOLUTION_DIRECT, src.md,
        weights.md, _md_or_null(bias), dst.md, c_strides, c_dilates, c_pad_l, c_pad_r, attr.attr),
        "deconvolution forward")
    return result


def deconvolution_backward_data_pd(MemoryDesc diff_src, MemoryDesc weights, MemoryDesc diff_dst, strides, dilates,
                                   pad_l, pad_r, PrimitiveDesc hint):
    """The data gradient of a deconvolution."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_deconvolution_backward_data_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>DECONVOLUTION_DIRECT, diff_src.md, weights.md, diff_dst.md,
        c_strides, c_dilates, c_pad_l, c_pad_r, hint.pd, attr.attr), "deconvolution backward data")
    return result


def deconvolution_backward_weights_pd(MemoryDesc src, MemoryDesc diff_weights, diff_bias, MemoryDesc diff_dst,
                                      strides, dilates, pad_l, pad_r, PrimitiveDesc hint):
    """The weight (and bias) gradient of a deconvolution."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_dilates, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_dilates, dilates)
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_deconvolution_backward_weights_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>DECONVOLUTION_DIRECT, src.md, diff_weights.md,
        _md_or_null(diff_bias), diff_dst.md, c_strides, c_dilates, c_pad_l, c_pad_r, hint.pd, attr.attr),
        "deconvolution backward weights")
    return result


def lrn_forward_pd(int prop_kind, MemoryDesc src, MemoryDesc dst, long local_size, float alpha, float beta,
                   float k):
    """A local response normalization across channels: ``src / (k + alpha / local_size * sum src**2) ** beta``."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_lrn_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>LRN_ACROSS_CHANNELS, src.md, dst.md,
        <dnnl_dim_t>local_size, alpha, beta, k, attr.attr), "lrn forward")
    return result


def lrn_backward_pd(MemoryDesc diff_src, MemoryDesc diff_dst, MemoryDesc src, long local_size, float alpha,
                    float beta, float k, PrimitiveDesc hint):
    """The gradient of a local response normalization across channels."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_lrn_backward_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>LRN_ACROSS_CHANNELS, diff_src.md, diff_dst.md, src.md,
        <dnnl_dim_t>local_size, alpha, beta, k, hint.pd, attr.attr), "lrn backward")
    return result


def sum_pd(MemoryDesc dst, sources):
    """The elementwise sum of ``sources`` (memory descriptors of ``dst``'s dims), each with scale 1."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef int n = len(sources), i
    cdef float* scales = <float*>PyMem_Malloc(max(n, 1) * sizeof(float))
    cdef const_dnnl_memory_desc_t* mds = <const_dnnl_memory_desc_t*>PyMem_Malloc(
        max(n, 1) * sizeof(const_dnnl_memory_desc_t))
    if scales == NULL or mds == NULL:
        PyMem_Free(scales)
        PyMem_Free(mds)
        raise MemoryError()
    try:
        for i in range(n):
            scales[i] = 1.0
            mds[i] = (<MemoryDesc>sources[i]).md
        check(dnnl_sum_primitive_desc_create(&result.pd, _engine, dst.md, n, scales, mds, attr.attr), "sum")
    finally:
        PyMem_Free(scales)
        PyMem_Free(mds)
    return result


def concat_pd(MemoryDesc dst, int axis, sources):
    """The concatenation of ``sources`` along ``axis`` into ``dst``."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef int n = len(sources), i
    cdef const_dnnl_memory_desc_t* mds = <const_dnnl_memory_desc_t*>PyMem_Malloc(
        max(n, 1) * sizeof(const_dnnl_memory_desc_t))
    if mds == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            mds[i] = (<MemoryDesc>sources[i]).md
        check(dnnl_concat_primitive_desc_create(&result.pd, _engine, dst.md, n, axis, mds, attr.attr), "concat")
    finally:
        PyMem_Free(mds)
    return result


def pooling_forward_pd(int prop_kind, int algorithm, MemoryDesc src, MemoryDesc dst, strides, kernel, pad_l,
                       pad_r):
    """A max or average pooling (no dilation)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_kernel, c_dilation, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_kernel, kernel)
    _fill_dims(c_dilation, [0] * len(kernel))
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_pooling_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>algorithm, src.md, dst.md, c_strides,
        c_kernel, c_dilation, c_pad_l, c_pad_r, attr.attr), "pooling forward")
    return result


def pooling_backward_pd(int algorithm, MemoryDesc diff_src, MemoryDesc diff_dst, strides, kernel, pad_l, pad_r,
                        PrimitiveDesc hint):
    """The gradient of a pooling."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    cdef dnnl_dims_t c_strides, c_kernel, c_dilation, c_pad_l, c_pad_r
    _fill_dims(c_strides, strides)
    _fill_dims(c_kernel, kernel)
    _fill_dims(c_dilation, [0] * len(kernel))
    _fill_dims(c_pad_l, pad_l)
    _fill_dims(c_pad_r, pad_r)
    check(dnnl_pooling_backward_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>algorithm, diff_src.md, diff_dst.md, c_strides, c_kernel, c_dilation,
        c_pad_l, c_pad_r, hint.pd, attr.attr), "pooling backward")
    return result


def batch_norm_forward_pd(int prop_kind, MemoryDesc src, MemoryDesc dst, float epsilon, unsigned flags):
    """A batch normalization over axis 1."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_batch_normalization_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, src.md, dst.md, epsilon, flags, attr.attr),
        "batch normalization forward")
    return result


def batch_norm_backward_pd(int prop_kind, MemoryDesc diff_src, MemoryDesc diff_dst, MemoryDesc src,
                           float epsilon, unsigned flags, PrimitiveDesc hint):
    """The gradient of a batch normalization."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_batch_normalization_backward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, diff_src.md, diff_dst.md, src.md, epsilon, flags,
        hint.pd, attr.attr), "batch normalization backward")
    return result


def inner_product_forward_pd(int prop_kind, MemoryDesc src, MemoryDesc weights, bias, MemoryDesc dst):
    """An inner product (FullyConnected)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_inner_product_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, src.md, weights.md, _md_or_null(bias), dst.md,
        attr.attr), "inner product forward")
    return result


def matmul_pd(MemoryDesc src, MemoryDesc weights, bias, MemoryDesc dst):
    """A matrix product ``dst = src @ weights (+ bias)``: (M x K) by (K x N), a bias of (1 x N)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_matmul_primitive_desc_create(&result.pd, _engine, src.md, weights.md, _md_or_null(bias), dst.md,
                                            attr.attr), "matmul")
    return result


def eltwise_forward_pd(int prop_kind, int algorithm, MemoryDesc src, MemoryDesc dst, float alpha, float beta):
    """An elementwise function (relu, logistic, tanh)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_eltwise_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>algorithm, src.md, dst.md, alpha, beta,
        attr.attr), "eltwise forward")
    return result


def eltwise_backward_pd(int algorithm, MemoryDesc diff_src, MemoryDesc diff_dst, MemoryDesc data, float alpha,
                        float beta, PrimitiveDesc hint):
    """The gradient of an elementwise function (``data``: its input, or its output for ``*_use_dst``)."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_eltwise_backward_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>algorithm, diff_src.md, diff_dst.md, data.md, alpha, beta, hint.pd,
        attr.attr), "eltwise backward")
    return result


def softmax_forward_pd(int prop_kind, int algorithm, MemoryDesc src, MemoryDesc dst, int axis):
    """A softmax (or log-softmax) along ``axis``."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_softmax_forward_primitive_desc_create(
        &result.pd, _engine, <dnnl_prop_kind_t>prop_kind, <dnnl_alg_kind_t>algorithm, src.md, dst.md, axis,
        attr.attr), "softmax forward")
    return result


def softmax_backward_pd(int algorithm, MemoryDesc diff_src, MemoryDesc diff_dst, MemoryDesc dst, int axis,
                        PrimitiveDesc hint):
    """The gradient of a softmax, from its output."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_softmax_backward_primitive_desc_create(
        &result.pd, _engine, <dnnl_alg_kind_t>algorithm, diff_src.md, diff_dst.md, dst.md, axis, hint.pd,
        attr.attr), "softmax backward")
    return result


def inner_product_backward_data_pd(MemoryDesc diff_src, MemoryDesc weights, MemoryDesc diff_dst,
                                   PrimitiveDesc hint):
    """The data gradient of an inner product."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_inner_product_backward_data_primitive_desc_create(
        &result.pd, _engine, diff_src.md, weights.md, diff_dst.md, hint.pd, attr.attr), "inner product backward data")
    return result


def inner_product_backward_weights_pd(MemoryDesc src, MemoryDesc diff_weights, diff_bias, MemoryDesc diff_dst,
                                      PrimitiveDesc hint):
    """The weight (and bias) gradient of an inner product."""
    cdef _Attr attr = _Attr()
    cdef PrimitiveDesc result = PrimitiveDesc()
    check(dnnl_inner_product_backward_weights_primitive_desc_create(
        &result.pd, _engine, src.md, diff_weights.md, _md_or_null(diff_bias), diff_dst.md, hint.pd, attr.attr),
        "inner product backward weights")
    return result


cdef void* _contiguous_data(object array, Py_ssize_t nbytes, int position) except NULL:
    """The data of ``array``, a C-contiguous numpy array of at least ``nbytes`` bytes (argument ``position``
    of a run, -1 for the scratchpad), read through numpy's C API: ``array.ctypes.data`` makes a ctypes
    object per call, about a microsecond for each argument of a call that may take a few in all."""
    cdef cnp.ndarray checked
    if isinstance(array, np.ndarray):
        checked = <cnp.ndarray>array
        if cnp.PyArray_IS_C_CONTIGUOUS(checked) and cnp.PyArray_NBYTES(checked) >= nbytes:
            return cnp.PyArray_DATA(checked)
    what = "the scratchpad" if position < 0 else f"argument {position}"
    raise ValueError(f"{what}: needs a C-contiguous array of at least {nbytes} bytes, got "
                     f"{getattr(array, 'nbytes', type(array).__name__)} bytes, "
                     f"contiguous={getattr(getattr(array, 'flags', None), 'c_contiguous', False)}")


cdef class Primitive:
    """A primitive with its argument slots.

    ``slots`` lists ``(arg, MemoryDesc)``: the arguments :meth:`run` binds, in order. The
    scratchpad (oneDNN's temporary space, :attr:`scratchpad_bytes` as the primitive descriptor
    sizes it) is the caller's, passed to each :meth:`run`: it is only used within one call, so
    the primitives of a process share a few buffers instead of each keeping its own (the
    backward convolutions of a ResNet-18 kept 15-45 MB). A primitive runs one call at a time:
    callers hold :attr:`lock` around :meth:`run`.
    """
    cdef dnnl_primitive_t primitive
    cdef dnnl_memory_t* memories
    cdef dnnl_exec_arg_t* args
    cdef int nargs
    cdef int nslots
    cdef readonly Py_ssize_t scratchpad_bytes
    cdef readonly object lock
    cdef readonly object descriptor
    cdef readonly tuple sizes

    def __cinit__(self, PrimitiveDesc pd, slots):
        cdef int i
        cdef MemoryDesc md
        cdef const_dnnl_memory_desc_t scratch_md
        self.descriptor = pd
        self.lock = threading.Lock()
        self.nslots = len(slots)
        self.nargs = self.nslots + 1
        check(dnnl_primitive_create(&self.primitive, pd.pd), "primitive creation")
        self.memories = <dnnl_memory_t*>PyMem_Malloc(self.nargs * sizeof(dnnl_memory_t))
        self.args = <dnnl_exec_arg_t*>PyMem_Malloc(self.nargs * sizeof(dnnl_exec_arg_t))
        if self.memories == NULL or self.args == NULL:
            raise MemoryError()
        for i in range(self.nargs):
            self.memories[i] = NULL
        sizes = []
        for i in range(self.nslots):
            arg, md = slots[i]
            check(dnnl_memory_create(&self.memories[i], md.md, _engine, NULL), "memory creation")
            self.args[i].arg = arg
            self.args[i].memory = self.memories[i]
            sizes.append(md.nbytes)
        self.sizes = tuple(sizes)
        scratch_md = dnnl_primitive_desc_query_md(pd.pd, <dnnl_query_t>dnnl_query_scratchpad_md, 0)
        self.scratchpad_bytes = dnnl_memory_desc_get_size(scratch_md) if scratch_md != NULL else 0
        # the data handle is set by each run (the caller's buffer)
        check(dnnl_memory_create(&self.memories[self.nslots], scratch_md, _engine, NULL), "scratchpad memory")
        self.args[self.nslots].arg = ARG_SCRATCHPAD
        self.args[self.nslots].memory = self.memories[self.nslots]

    def __dealloc__(self):
        cdef int i
        if self.memories != NULL:
            for i in range(self.nargs):
                if self.memories[i] != NULL:
                    dnnl_memory_destroy(self.memories[i])
            PyMem_Free(self.memories)
        if self.args != NULL:
            PyMem_Free(self.args)
        if self.primitive != NULL:
            dnnl_primitive_destroy(self.primitive)

    def run(self, arrays, scratchpad=None):
        """Execute on ``arrays`` (one writable, C-contiguous numpy array per slot, each at least the
        slot's size in bytes) with ``scratchpad`` (a C-contiguous array of at least
        :attr:`scratchpad_bytes`; ``None`` when that is 0), without the GIL, and wait for it."""
        cdef int i
        if len(arrays) != self.nslots:
            raise ValueError(f"primitive takes {self.nslots} arrays, got {len(arrays)}")
        for i in range(self.nslots):
            check(dnnl_memory_set_data_handle(self.memories[i], _contiguous_data(arrays[i], self.sizes[i], i)),
                  "data handle")
        self._execute(scratchpad)

    cdef int _execute(self, scratchpad) except -1:
        """Bind ``scratchpad`` and execute on the memory the slots hold now, without the GIL, and wait for it."""
        cdef Stream stream = thread_stream()
        cdef dnnl_status_t status
        if self.scratchpad_bytes:
            if scratchpad is None:
                raise ValueError(f"the scratchpad must be a C-contiguous array of at least {self.scratchpad_bytes} "
                                 "bytes, got None")
            check(dnnl_memory_set_data_handle(self.memories[self.nslots],
                                              _contiguous_data(scratchpad, self.scratchpad_bytes, -1)),
                  "scratchpad handle")
        with nogil:
            status = dnnl_primitive_execute(self.primitive, stream.stream, self.nargs, self.args)
            if status == dnnl_success:
                status = dnnl_stream_wait(stream.stream)
        check(status, "execution")
        return 0


cdef void* _ref_data(Primitive primitive, int slot, ref, inputs, outputs, workspace) except NULL:
    """The data of slot ``slot`` of ``primitive`` named by a program's ``ref``: ``("in", i)``, ``("out", i)`` or
    ``("ws", offset, nbytes)`` (a part of ``workspace``), checked as :meth:`Primitive.run` checks its arrays."""
    cdef cnp.ndarray space
    cdef Py_ssize_t offset, nbytes
    kind = ref[0]
    if kind == "in":
        return _contiguous_data(inputs[ref[1]], primitive.sizes[slot], slot)
    if kind == "out":
        return _contiguous_data(outputs[ref[1]], primitive.sizes[slot], slot)
    offset, nbytes = ref[1], ref[2]
    if not isinstance(workspace, np.ndarray) or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>workspace) \
            or offset < 0 or nbytes < primitive.sizes[slot] \
            or offset + nbytes > cnp.PyArray_NBYTES(<cnp.ndarray>workspace):
        raise ValueError(f"argument {slot}: workspace slot {ref!r} does not fit a workspace of "
                         f"{getattr(workspace, 'nbytes', None)} bytes or the primitive's {primitive.sizes[slot]} bytes")
    space = <cnp.ndarray>workspace
    return <char*>cnp.PyArray_DATA(space) + offset


def run_steps(steps, inputs, outputs, workspace, scratchpad, resolve):
    """Run a program's ``steps`` (``(primitive, refs)`` pairs, as :class:`mxkit_onednn.program.Program` keeps
    them) on ``inputs``, ``outputs`` and ``workspace``. A :class:`Primitive`'s refs are bound to their memory
    here: what ``primitive.run([resolve(ref, inputs, outputs, workspace) for ref in refs], scratchpad)`` does,
    without the list, a slice of the workspace per workspace slot, or a Python call per ref (a small layer's
    call spent more on those than on its arithmetic). Any other step object gets exactly that call."""
    cdef Primitive primitive
    cdef int i
    for step, refs in steps:
        if not isinstance(step, Primitive):
            step.run([resolve(ref, inputs, outputs, workspace) for ref in refs], scratchpad)
            continue
        primitive = <Primitive>step
        if len(refs) != primitive.nslots:
            raise ValueError(f"primitive takes {primitive.nslots} arrays, got {len(refs)}")
        for i in range(primitive.nslots):
            check(dnnl_memory_set_data_handle(primitive.memories[i],
                                              _ref_data(primitive, i, refs[i], inputs, outputs, workspace)),
                  "data handle")
        primitive._execute(scratchpad)


def float32_call_signature(inputs, outputs, params):
    """:func:`mxkit_onednn.kernels.call_signature` in C: ``((shape, ..., len(inputs)), tuple(params.items()))``
    when every array is a C-contiguous float32 numpy array (native byte order) and the parameters hash, else
    None. It runs on every call of a oneDNN kernel, where the Python loop over the arrays (a flags object per
    array) took more than the rest of the lookup."""
    cdef list shapes = []
    cdef cnp.ndarray checked
    for group in (inputs, outputs):
        for array in group:
            if type(array) is not np.ndarray:
                return None
            checked = <cnp.ndarray>array
            if cnp.PyArray_TYPE(checked) != cnp.NPY_FLOAT32 or not cnp.PyArray_ISNOTSWAPPED(checked) \
                    or not cnp.PyArray_IS_C_CONTIGUOUS(checked):
                return None
            shapes.append(array.shape)
    shapes.append(len(inputs))
    signature = (tuple(shapes), tuple(params.items()))
    try:
        hash(signature)
    except TypeError:
        return None
    return signature


# ---- memory descriptors of other data types (bfloat16), and the CPU's instruction set as oneDNN sees it ----

cdef extern from "oneapi/dnnl/dnnl.h" nogil:
    int dnnl_bf16
    ctypedef int dnnl_cpu_isa_t
    dnnl_cpu_isa_t dnnl_get_effective_cpu_isa()


#: oneDNN's data types by numpy's names (the element types :func:`typed_md` takes)
DATA_TYPES = {"float32": dnnl_f32, "bfloat16": dnnl_bf16}


def typed_md(dims, data_type, tag="plain"):
    """A memory descriptor of ``dims`` with elements of ``data_type`` (a key of :data:`DATA_TYPES`) in
    layout ``tag``: ``"plain"`` (row-major, numpy's C order), ``"any"`` (the primitive chooses) or one of
    :func:`tagged_md`'s format tags."""
    cdef dnnl_dims_t c_dims
    cdef MemoryDesc result = MemoryDesc()
    cdef int c_tag
    if data_type not in DATA_TYPES:
        raise ValueError(f"no oneDNN data type for {data_type!r}; known: {', '.join(DATA_TYPES)}")
    if tag == "plain":
        c_tag = _plain_tag(len(dims))
    elif tag == "any":
        c_tag = dnnl_format_tag_any
    elif _TAG_DIMS.get(tag) == len(dims):
        c_tag = _TAGS[tag]
    else:
        raise ValueError(f"no layout {tag!r} of {len(dims)} dimensions here")
    _fill_dims(c_dims, dims)
    check(dnnl_memory_desc_create_with_tag(&result.md, len(dims), c_dims, <dnnl_data_type_t>DATA_TYPES[data_type],
                                           <dnnl_format_tag_t>c_tag), "memory descriptor")
    return result


def effective_cpu_isa():
    """The instruction set oneDNN's kernels use on this CPU (``dnnl_cpu_isa_t``: 0xe7 is
    avx512_core_bf16, 0x27 avx512_core, 0x7 avx2...; see oneDNN's dnnl_types.h)."""
    return int(dnnl_get_effective_cpu_isa())
