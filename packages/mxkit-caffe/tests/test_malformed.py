"""Bad input: malformed prototxt, damaged caffemodel, unsupported layers, sizes out of bounds.

Each fails with an mxkit error saying what and where, and nothing is written.
"""

import os

import numpy as np
import pytest
from mxkit.caffe import UnsupportedLayerError, caffe_pb2, convert_mean, convert_model, convert_symbol, reader
from mxkit.caffe.convert import convert_net
from mxkit.core.errors import FormatError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
SMALLNET = os.path.join(FIXTURES, "smallnet.prototxt")
SMALLNET_MODEL = os.path.join(FIXTURES, "smallnet.caffemodel")
INPUT = 'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }\n'


def _write(path, text):
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return str(path)


def _nothing_written(tmp_path, prefix="out"):
    return not any(name.startswith(prefix) for name in os.listdir(tmp_path))


# ---- prototxt ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "words"), [
    (INPUT + 'layer { name: "r" type: "ReLU" bottom: "data" top: "r"\n  relu_param { negative_slop: 1 } }\n',
     3, 16, "no field named \"negative_slop\""),
    (INPUT + 'layer { name: "r"\n  type: ReLU }\n', 3, 9, "Expected string"),
    (INPUT + 'layer {\n name: "r"\n', 3, 8, 'Expected "}"'),
    ('input_dim: -x\n', 1, 12, "Couldn't parse integer"),
])
def test_malformed_prototxt_names_line_and_column(tmp_path, text, line, column, words):
    path = _write(tmp_path / "deploy.prototxt", text)
    with pytest.raises(FormatError) as info:
        convert_symbol(path)
    message = str(info.value)
    assert f"deploy.prototxt: line {line}, column {column}" in message and words in message


def test_binary_file_given_as_prototxt(tmp_path):
    with pytest.raises(FormatError, match="not UTF-8 text"):
        convert_symbol(_write(tmp_path / "model.prototxt", b"\x0a\xff\xfe\x00"))


def test_oversized_prototxt_is_refused_before_reading(tmp_path, monkeypatch):
    path = _write(tmp_path / "big.prototxt", INPUT * 10)
    monkeypatch.setattr(reader, "MAX_PROTOTXT_BYTES", 100)
    with pytest.raises(FormatError, match=r"over the limit of 100 bytes"):
        convert_symbol(path)


def test_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match="cannot read the prototxt"):
        convert_symbol(str(tmp_path / "absent.prototxt"))


# ---- caffemodel ----------------------------------------------------------------------------

def test_truncated_caffemodel_names_offset_and_layer(tmp_path):
    data = open(SMALLNET_MODEL, "rb").read()
    net = caffe_pb2.NetParameter.FromString(data)
    cut = len(data) // 2
    path = _write(tmp_path / "cut.caffemodel", data[:cut])
    with pytest.raises(FormatError) as info:
        convert_model(SMALLNET, path, str(tmp_path / "out"))
    message = str(info.value)
    assert "truncated" in message and f"the file is {cut} bytes" in message and "byte offset" in message
    # the layer the cut falls in, by position and by name
    offset = 0
    for index, layer in enumerate(net.layer):
        size = len(layer.SerializeToString())
        header = len(caffe_pb2.NetParameter(layer=[layer]).SerializeToString()) - size
        if offset + header + size > cut:
            assert f"layer #{index} ({layer.name!r})" in message
            break
        offset += header + size
    assert _nothing_written(tmp_path)


def test_every_truncation_is_a_format_error(tmp_path):
    data = open(SMALLNET_MODEL, "rb").read()
    for cut in range(1, len(data), 41):
        path = _write(tmp_path / "cut.caffemodel", data[:cut])
        with pytest.raises(FormatError):
            convert_model(SMALLNET, path, str(tmp_path / "out"))
    assert _nothing_written(tmp_path)


def test_corrupted_caffemodel_converts_or_fails_cleanly(tmp_path):
    data = open(SMALLNET_MODEL, "rb").read()
    rng = np.random.default_rng(11)
    for trial in range(40):
        damaged = bytearray(data)
        for position in rng.integers(len(data), size=4):
            damaged[position] = int(rng.integers(256))
        path = _write(tmp_path / f"bad{trial}.caffemodel", bytes(damaged))
        try:
            convert_model(SMALLNET, path)  # a flipped float is still a valid file
        except FormatError:
            pass


def test_garbage_is_not_a_caffemodel(tmp_path):
    path = _write(tmp_path / "x.caffemodel", b"\xff" * 20)
    with pytest.raises(FormatError, match=r"byte offset 0: a varint is longer than 10 bytes"):
        convert_model(SMALLNET, path)
    path = _write(tmp_path / "y.caffemodel", b"\x0fabc")
    with pytest.raises(FormatError, match=r"field 1 has wire type 7"):
        convert_model(SMALLNET, path)


def test_weights_of_another_network_are_refused(tmp_path):
    other = os.path.join(FIXTURES, "layers", "convolution.caffemodel")
    with pytest.raises(FormatError, match=r"caffemodel has no layer 'conv1/7x7-s2'"):
        convert_model(SMALLNET, other, str(tmp_path / "out"))
    hw = os.path.join(FIXTURES, "layers", "convolution_hw.prototxt")
    expected = r"layer 'convolution1': weight blob has shape \(4, 3, 3, 3\).*kernel \(3, 2\)"
    with pytest.raises(FormatError, match=expected):
        convert_model(hw, other, str(tmp_path / "out"))
    assert _nothing_written(tmp_path)


def _model_with_blob(tmp_path, layer_text, blob):
    net = reader.parse_prototxt(INPUT + layer_text)
    model = caffe_pb2.NetParameter()
    model.CopyFrom(net)
    model.layer[1].blobs.append(blob)
    return _write(tmp_path / "deploy.prototxt", INPUT + layer_text), _write(tmp_path / "m.caffemodel",
                                                                         model.SerializeToString())


def test_blob_shape_must_match_its_values(tmp_path):
    conv = 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 2 ' \
           'kernel_size: 1 bias_term: false } }\n'
    blob = caffe_pb2.BlobProto()
    blob.shape.dim.extend([2, 3, 1, 1])
    blob.data.extend([1.0] * 5)
    prototxt, model = _model_with_blob(tmp_path, conv, blob)
    with pytest.raises(FormatError, match=r"blob shape \(2, 3, 1, 1\) needs 6 values but the file stores 5"):
        convert_model(prototxt, model)
    huge = caffe_pb2.BlobProto()
    huge.shape.dim.extend([1 << 40, 3])
    prototxt, model = _model_with_blob(tmp_path, conv, huge)
    with pytest.raises(FormatError, match=r"has a dimension outside"):
        convert_model(prototxt, model)


# ---- network definitions -------------------------------------------------------------------

def test_unsupported_layers_are_named_before_anything_is_written(tmp_path):
    text = INPUT + ('layer { name: "py" type: "Python" bottom: "data" top: "p" }\n'
                    'layer { name: "relu" type: "ReLU" bottom: "p" top: "r" }\n'
                    'layer { name: "roi" type: "ROIPooling" bottom: "r" top: "q" }\n')
    path = _write(tmp_path / "deploy.prototxt", text)
    with pytest.raises(UnsupportedLayerError, match=r"2 layer\(s\): 'py' \(type Python\), 'roi' \(type ROIPooling\)"):
        convert_model(path, SMALLNET_MODEL, str(tmp_path / "out"))
    assert _nothing_written(tmp_path)


@pytest.mark.parametrize(("layer_text", "words"), [
    ('layer { name: "s" type: "Scale" bottom: "data" top: "s" }', "Scale layer is converted only right after"),
    ('layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: STOCHASTIC kernel_size: 2 } }',
     "pool=STOCHASTIC is not supported"),
    ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 0 '
     'kernel_size: 1 } }', "num_output=[0] must lie in 1.."),
    ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 '
     'kernel_size: 1 group: 3 } }', "not a multiple of group=3"),
    ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 } }',
     "kernel_size (or kernel_h and kernel_w) is required"),
    ('layer { name: "l" type: "LRN" bottom: "data" top: "l" lrn_param { local_size: 4 } }', "must be odd"),
    ('layer { name: "f" type: "Flatten" bottom: "data" top: "f" flatten_param { end_axis: 2 } }',
     "only flattening from an axis >= 1 to the last one"),
    ('layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" slice_param { slice_point: 2 '
     'slice_point: 3 } }', "one point fewer than the 2 tops"),
    ('layer { name: "r" type: "ReLU" bottom: "nothing" top: "r" }', "reads blob 'nothing', which no earlier"),
    ('layer { name: "r" type: "ReLU" bottom: "data" top: "x" }\nlayer { name: "t" type: "TanH" bottom: "data" '
     'top: "x" }', "writes blob 'x', which an earlier layer already wrote"),
    # Caffe drops a last window that starts in the padding; MXNet's 'full' rounding keeps it
    ('layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 2 '
     'stride: 3 pad: 1 } }', "Caffe pools to (2, 2)"),
])
def test_unconvertible_settings_name_the_layer(tmp_path, layer_text, words):
    path = _write(tmp_path / "deploy.prototxt", INPUT + layer_text + "\n")
    with pytest.raises(FormatError) as info:
        convert_symbol(path)
    assert words in str(info.value)


def test_input_sizes_are_bounded(tmp_path):
    path = _write(tmp_path / "deploy.prototxt", 'input: "data"\ninput_shape { dim: 1 dim: 1099511627776 }\n'
                  'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n')
    with pytest.raises(FormatError, match=r"input 'data': input shape \(1, 1099511627776\) must be"):
        convert_symbol(path)
    path = _write(tmp_path / "dims.prototxt", 'input: "data"\ninput_dim: 1\ninput_dim: 3\n'
                  'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n')
    with pytest.raises(FormatError, match=r"input_dim has 2 values; 1 inputs need 4 each"):
        convert_symbol(path)


def test_v0_layers_are_refused_with_the_upgrade_tool_named():
    net = caffe_pb2.NetParameter()
    old = net.layers.add(name="conv")
    old.layer.name = "conv"
    with pytest.raises(FormatError, match="V0 format; upgrade the file with Caffe's upgrade_net_proto"):
        convert_net(reader.upgrade_v1_net(net, "old.prototxt"))


def test_truncated_mean_file(tmp_path):
    data = open(os.path.join(FIXTURES, "mean.binaryproto"), "rb").read()
    path = _write(tmp_path / "mean.binaryproto", data[:-7])
    with pytest.raises(FormatError, match=r"truncated mean file: byte offset \d+"):
        convert_mean(path)
    blob = caffe_pb2.BlobProto(num=2, channels=3, height=1, width=1)
    blob.data.extend([0.0] * 6)
    with pytest.raises(FormatError, match=r"a mean image has shape \(1, C, H, W\)"):
        convert_mean(_write(tmp_path / "two.binaryproto", blob.SerializeToString()))


def test_weights_that_do_not_fit_the_input_shape(tmp_path):
    layers = os.path.join(FIXTURES, "layers")
    with pytest.raises(FormatError, match=r"weights do not fit.*'innerproduct1_weight'.*\(7, 48\).*\(7, 75\)"):
        convert_model(os.path.join(layers, "inner_product.prototxt"), os.path.join(layers, "inner_product.caffemodel"),
                      str(tmp_path / "out"), input_shapes={"data": (2, 3, 5, 5)})
    with pytest.raises(FormatError,
                       match=r"weights do not fit.*cannot broadcast gamma \(3,\).*\(4,\) for one slope per channel"):
        convert_model(os.path.join(layers, "prelu.prototxt"), os.path.join(layers, "prelu.caffemodel"),
                      str(tmp_path / "out"), input_shapes={"data": (2, 4, 5, 5)})
    assert _nothing_written(tmp_path)


def test_layer_and_v1_layers_together_are_refused(tmp_path):
    text = INPUT + 'layers { name: "r" type: RELU bottom: "data" top: "r" }\n'
    with pytest.raises(FormatError, match="both 'layer' and the deprecated V1 'layers'"):
        convert_symbol(_write(tmp_path / "mixed.prototxt", text))
