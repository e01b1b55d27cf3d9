"""mxkit-io: MXNet-compatible RecordIO, data iterators and a threaded image pipeline.

Works with only mxkit-core and numpy installed (batches are numpy arrays); batches are
NDArrays when mxkit-ndarray is installed (config key ``io_batch_type``). Image decoding
needs OpenCV (``pip install mxkit-io[image]``) and URIs need fsspec
(``pip install mxkit-io[fsspec]``); both are imported only when used.
"""

from mxkit.io.databatch import DataBatch, DataDesc, DataIter
from mxkit.io.image_iter import ImageRecordIter
from mxkit.io.ndarray_iter import NDArrayIter
from mxkit.io.recordio import IRHeader, MXIndexedRecordIO, MXRecordIO, pack, pack_img, unpack, unpack_img
from mxkit.io.text_iters import CSVIter, LibSVMIter
from mxkit.io.wrappers import PrefetchingIter, ResizeIter

__all__ = [
    "CSVIter",
    "DataBatch",
    "DataDesc",
    "DataIter",
    "IRHeader",
    "ImageRecordIter",
    "LibSVMIter",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "NDArrayIter",
    "PrefetchingIter",
    "ResizeIter",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]
