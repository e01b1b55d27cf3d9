"""mxkit-io: MXNet-compatible RecordIO and data iterators (numpy only; NDArray batches
when mxkit-ndarray is installed). The readers and iterators land with the IO issue.
"""
