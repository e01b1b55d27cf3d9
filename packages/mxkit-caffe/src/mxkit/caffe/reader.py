"""Reading Caffe's files: the text prototxt, the binary caffemodel and the binaryproto mean.

Every reader bounds the file size before reading it, turns protobuf's complaints into a
:class:`~mxkit.core.errors.FormatError` with the line (text) or byte offset (binary), and
upgrades the deprecated V1 layer list (``layers { type: CONVOLUTION }``) to the current one
the way Caffe's ``UpgradeV1Net`` does. Blobs come out as float32 numpy arrays whose shape has
been checked against the number of values stored.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError

# the text of a network definition is small; 64 MiB is far beyond any real prototxt
MAX_PROTOTXT_BYTES = 64 << 20
# protobuf cannot parse a message of 2 GiB or more
MAX_BINARY_BYTES = (2 << 30) - 1
# dimensions beyond this are not a real blob or input but a damaged or hostile file
MAX_DIM = 1 << 31
MAX_ELEMENTS = 1 << 33

# Caffe's UpgradeV1LayerType: V1 enum name -> layer type string
V1_LAYER_TYPES = {
    "ABSVAL": "AbsVal", "ACCURACY": "Accuracy", "ARGMAX": "ArgMax", "BNLL": "BNLL", "CONCAT": "Concat",
    "CONTRASTIVE_LOSS": "ContrastiveLoss", "CONVOLUTION": "Convolution", "DECONVOLUTION": "Deconvolution",
    "DATA": "Data", "DROPOUT": "Dropout", "DUMMY_DATA": "DummyData", "EUCLIDEAN_LOSS": "EuclideanLoss",
    "ELTWISE": "Eltwise", "EXP": "Exp", "FLATTEN": "Flatten", "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output",
    "HINGE_LOSS": "HingeLoss", "IM2COL": "Im2col", "IMAGE_DATA": "ImageData", "INFOGAIN_LOSS": "InfogainLoss",
    "INNER_PRODUCT": "InnerProduct", "LRN": "LRN", "MEMORY_DATA": "MemoryData",
    "MULTINOMIAL_LOGISTIC_LOSS": "MultinomialLogisticLoss", "MVN": "MVN", "POOLING": "Pooling", "POWER": "Power",
    "RELU": "ReLU", "SIGMOID": "Sigmoid", "SIGMOID_CROSS_ENTROPY_LOSS": "SigmoidCrossEntropyLoss",
    "SILENCE": "Silence", "SOFTMAX": "Softmax", "SOFTMAX_LOSS": "SoftmaxWithLoss", "SPLIT": "Split",
    "SLICE": "Slice", "TANH": "TanH", "WINDOW_DATA": "WindowData", "THRESHOLD": "Threshold",
}

_NET_LAYER_FIELD = 100  # NetParameter.layer
_NET_V1_LAYERS_FIELD = 2  # NetParameter.layers (V1)


def caffe_pb2() -> Any:
    """The generated message classes of Caffe's schema (``mxkit/caffe/caffe.proto``)."""
    from mxkit.caffe import caffe_pb2 as module

    return module


def read_bounded(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of ``path``, refusing a file larger than ``limit`` before reading it."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise FormatError(f"cannot read the {what} {os.fspath(path)!r}: {exc.strerror or exc}") from None
    if size > limit:
        raise FormatError(f"the {what} {os.fspath(path)!r} is {size} bytes, over the limit of {limit} bytes")
    with open(path, "rb") as stream:
        return stream.read(limit + 1)[:limit]


# ---- text ------------------------------------------------------------------------------------

def parse_prototxt(text: str | bytes, source: str = "<prototxt>") -> Any:
    """A ``NetParameter`` from Caffe's text format, V1 layers upgraded.

    Raises
    ------
    FormatError
        Naming ``source``, the line and column, and what protobuf expected there.
    """
    from google.protobuf import text_format

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{source}: not UTF-8 text (byte offset {exc.start}); a prototxt is text, "
                              f"a .caffemodel is read with read_caffemodel") from None
    if len(text) > MAX_PROTOTXT_BYTES:
        raise FormatError(f"{source}: {len(text)} characters, over the prototxt limit of {MAX_PROTOTXT_BYTES}")
    net = caffe_pb2().NetParameter()
    try:
        text_format.Parse(text, net)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        reason = str(exc)
        # protobuf prefixes the message with "line:column : "; we say it in words instead
        if line is not None and reason.startswith(f"{line}:"):
            reason = reason.split(" : ", 1)[-1]
        where = f"line {line}, column {column}" if line is not None else "somewhere"
        hint = ("BVLC Caffe's schema has no such field; layers and options of Caffe's forks are not supported"
                if "has no field named" in reason else "Caffe's protobuf text format is expected")
        raise FormatError(f"{source}: {where}: {reason} ({hint})") from None
    return upgrade_v1_net(net, source)


def read_prototxt(path: str | os.PathLike[str]) -> Any:
    """The ``NetParameter`` of a ``.prototxt`` file (see :func:`parse_prototxt`)."""
    return parse_prototxt(read_bounded(path, MAX_PROTOTXT_BYTES, "prototxt"), os.fspath(path))


# ---- binary ----------------------------------------------------------------------------------

def _locate_damage(data: bytes, source: str) -> None:
    """Raise a FormatError naming the offset and layer of the first structural damage, if any."""
    from mxkit.caffe.wire import WireError, scan_fields

    view = memoryview(data)
    try:
        scan_fields(view)
    except WireError as exc:
        intact = scan_fields(view, 0, exc.offset)  # everything before the damage was walked already
        layer_index = sum(1 for f in intact if f.number in (_NET_LAYER_FIELD, _NET_V1_LAYERS_FIELD))
        raise FormatError(f"{source}: damaged or truncated caffemodel, in top-level field #{len(intact)}"
                          f"{_layer_words(view, exc.offset, layer_index)}: {exc} (the file is {len(data)} bytes)") \
            from None


def _find_bad_layer(data: bytes, source: str) -> None:
    """Raise a FormatError naming the first layer protobuf cannot parse (the file's structure is intact)."""
    from google.protobuf.message import DecodeError
    from mxkit.caffe.wire import leading_string, scan_fields

    pb2 = caffe_pb2()
    view = memoryview(data)
    layer_index = 0
    for field in scan_fields(view):
        if field.number not in (_NET_LAYER_FIELD, _NET_V1_LAYERS_FIELD):
            continue
        message = pb2.LayerParameter() if field.number == _NET_LAYER_FIELD else pb2.V1LayerParameter()
        try:
            message.ParseFromString(bytes(view[field.payload_start:field.end]))
        except DecodeError as exc:
            name = leading_string(view, field.payload_start, field.end,
                                  1 if field.number == _NET_LAYER_FIELD else 4)
            raise FormatError(f"{source}: layer #{layer_index}{f' ({name!r})' if name else ''} at byte offset "
                              f"{field.start} is not a valid Caffe layer: {exc}") from None
        layer_index += 1


def _layer_words(view: memoryview, offset: int, layer_index: int) -> str:
    """", layer #k ('name')" for the field at ``offset`` when it is a layer whose name is readable."""
    from mxkit.caffe.wire import WireError, leading_string, read_varint

    try:
        tag, after_tag = read_varint(view, offset, len(view))
        length, payload = read_varint(view, after_tag, len(view))
    except WireError:
        return ""
    if tag >> 3 not in (_NET_LAYER_FIELD, _NET_V1_LAYERS_FIELD):
        return ""
    name = leading_string(view, payload, min(payload + length, len(view)), 1 if tag >> 3 == _NET_LAYER_FIELD else 4)
    return f", layer #{layer_index}" + (f" ({name!r})" if name else "")


def parse_caffemodel(data: bytes, source: str = "<caffemodel>") -> Any:
    """A ``NetParameter`` from Caffe's binary format (a ``.caffemodel``), V1 layers upgraded.

    Raises
    ------
    FormatError
        For a truncated or damaged file, naming the byte offset and the layer.
    """
    from google.protobuf.message import DecodeError

    if len(data) > MAX_BINARY_BYTES:
        raise FormatError(f"{source}: {len(data)} bytes, over protobuf's limit of {MAX_BINARY_BYTES}")
    _locate_damage(data, source)
    net = caffe_pb2().NetParameter()
    try:
        net.ParseFromString(data)
    except DecodeError as exc:
        _find_bad_layer(data, source)
        raise FormatError(f"{source}: not a valid Caffe NetParameter: {exc}") from None
    return upgrade_v1_net(net, source)


def read_caffemodel(path: str | os.PathLike[str]) -> Any:
    """The ``NetParameter`` of a ``.caffemodel`` file (see :func:`parse_caffemodel`)."""
    return parse_caffemodel(read_bounded(path, MAX_BINARY_BYTES, "caffemodel"), os.fspath(path))


# ---- V1 upgrade ------------------------------------------------------------------------------

def upgrade_v1_net(net: Any, source: str) -> Any:
    """``net`` with its V1 ``layers`` moved into ``layer`` (Caffe's UpgradeV1Net); V0 is refused."""
    if not len(net.layers):
        return net
    if len(net.layer):
        raise FormatError(f"{source}: the net has both 'layer' and the deprecated V1 'layers'; Caffe refuses "
                          f"such a file too: use one of them")
    pb2 = caffe_pb2()
    enum = pb2.V1LayerParameter.LayerType
    target_fields = {f.name for f in pb2.LayerParameter.DESCRIPTOR.fields}
    upgraded = pb2.NetParameter()
    upgraded.CopyFrom(net)
    del upgraded.layers[:]
    for index, old in enumerate(net.layers):
        if old.HasField("layer"):
            raise FormatError(f"{source}: layer #{index} ({old.name!r}) is in Caffe's V0 format; upgrade the file "
                              f"with Caffe's upgrade_net_proto_text / upgrade_net_proto_binary first")
        layer = upgraded.layer.add()
        layer.name = old.name
        layer.type = V1_LAYER_TYPES.get(enum.Name(old.type), enum.Name(old.type)) if old.HasField("type") else ""
        layer.bottom.extend(old.bottom)
        layer.top.extend(old.top)
        layer.blobs.extend(old.blobs)
        layer.include.extend(old.include)
        layer.exclude.extend(old.exclude)
        layer.loss_weight.extend(old.loss_weight)
        for descriptor, value in old.ListFields():
            if descriptor.name.endswith("_param") and descriptor.name in target_fields:
                getattr(layer, descriptor.name).CopyFrom(value)
    return upgraded


# ---- blobs -----------------------------------------------------------------------------------

def blob_shape(blob: Any, what: str) -> tuple[int, ...]:
    """The shape of a ``BlobProto`` (its ``shape``, or the legacy num/channels/height/width), bounded."""
    if blob.HasField("shape"):
        dims = tuple(int(d) for d in blob.shape.dim)
    else:
        dims = (int(blob.num), int(blob.channels), int(blob.height), int(blob.width))
    if any(not 0 <= d < MAX_DIM for d in dims):
        raise FormatError(f"{what}: blob shape {dims} has a dimension outside 0..{MAX_DIM - 1}")
    if math.prod(dims) > MAX_ELEMENTS:
        raise FormatError(f"{what}: blob shape {dims} has {math.prod(dims)} elements, over {MAX_ELEMENTS}")
    return dims


def blob_array(blob: Any, what: str) -> np.ndarray:
    """A ``BlobProto`` as a float32 array of its shape; the stored value count must match the shape."""
    shape = blob_shape(blob, what)
    values = blob.double_data if len(blob.double_data) else blob.data
    if len(values) != math.prod(shape):
        raise FormatError(f"{what}: blob shape {shape} needs {math.prod(shape)} values but the file stores "
                          f"{len(values)}")
    return np.asarray(values, dtype=np.float32).reshape(shape)


def read_mean(path: str | os.PathLike[str]) -> np.ndarray:
    """The mean image of a Caffe ``.binaryproto`` (a ``BlobProto``) as a float32 array, as stored."""
    from google.protobuf.message import DecodeError
    from mxkit.caffe.wire import WireError, scan_fields

    source = os.fspath(path)
    data = read_bounded(path, MAX_BINARY_BYTES, "mean file")
    try:
        scan_fields(memoryview(data))
    except WireError as exc:
        raise FormatError(f"{source}: damaged or truncated mean file: {exc} (the file is {len(data)} bytes)") \
            from None
    blob = caffe_pb2().BlobProto()
    try:
        blob.ParseFromString(data)
    except DecodeError as exc:
        raise FormatError(f"{source}: not a Caffe BlobProto (.binaryproto): {exc}") from None
    return blob_array(blob, source)
