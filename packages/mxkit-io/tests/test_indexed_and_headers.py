"""MXIndexedRecordIO, IRHeader pack/unpack and images against MXNet 1.9.1's files."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import ConfigError, FormatError
from mxkit.io import recordio
from mxkit.io.recordio import IRHeader, RecordKeyError
from mxkit_io_test_helpers import FIXTURES, generators


def test_mxnet_indexed_file_with_vector_labels():
    reader = recordio.MXIndexedRecordIO(
        str(FIXTURES / "mxnet_indexed.idx"), str(FIXTURES / "mxnet_indexed.rec"), "r"
    )
    items = generators.indexed_items()
    assert reader.keys == [key for key, *_ in items]
    for key, label, id2, payload in reversed(items):  # random access, backwards
        header, body = recordio.unpack(reader.read_idx(key))
        assert body == payload
        assert (header.id, header.id2) == (key, id2)
        if isinstance(label, float):
            assert header.flag == 0 and header.label == pytest.approx(label)
        else:
            assert header.flag == len(label)
            np.testing.assert_array_equal(header.label, np.asarray(label, dtype=np.float32))


def test_our_indexed_file_is_identical_to_mxnets(tmp_path):
    rec, idx = tmp_path / "i.rec", tmp_path / "i.idx"
    with recordio.MXIndexedRecordIO(str(idx), str(rec), "w") as writer:
        for key, label, id2, payload in generators.indexed_items():
            writer.write_idx(key, recordio.pack(IRHeader(0, label, key, id2), payload))
    assert rec.read_bytes() == (FIXTURES / "mxnet_indexed.rec").read_bytes()
    assert idx.read_text() == (FIXTURES / "mxnet_indexed.idx").read_text()


def test_pack_layout_is_native_IfQQ():
    packed = recordio.pack(IRHeader(7, 2.5, 3, 4), b"xy")
    assert packed == np.array([0], "<u4").tobytes() + np.float32(2.5).tobytes() + \
        np.array([3, 4], "<u8").tobytes() + b"xy"
    vector = recordio.pack(IRHeader(0, [1, 2], 5, 6), b"z")
    assert vector[:4] == np.uint32(2).tobytes() and vector[24:32] == np.float32([1, 2]).tobytes()
    header, payload = recordio.unpack(vector)
    assert payload == b"z" and header.flag == 2 and list(header.label) == [1.0, 2.0]


def test_unpack_rejects_short_records():
    with pytest.raises(FormatError, match="too short for an IRHeader"):
        recordio.unpack(b"\0" * 10)
    truncated = recordio.pack(IRHeader(0, [1, 2, 3], 0, 0), b"")[:-4]
    with pytest.raises(FormatError, match="3 float32 values"):
        recordio.unpack(truncated)


def test_mxnet_images_decode_exactly():
    pytest.importorskip("cv2")
    reader = recordio.MXIndexedRecordIO(str(FIXTURES / "mxnet_images.idx"), str(FIXTURES / "mxnet_images.rec"), "r")
    sources = generators.fixture_images()
    with np.load(FIXTURES / "mxnet_images.npz") as arrays:
        for index in range(8):
            header, img = recordio.unpack_img(reader.read_idx(index))
            assert list(header.label) == [index % 4, index]
            if generators.image_format(index)[0] == ".png":  # lossless: the source pixels
                np.testing.assert_array_equal(img, sources[index])
            else:  # what MXNet's own OpenCV decoded
                np.testing.assert_array_equal(img, arrays[f"decoded_{index}"])
                assert np.abs(img.astype(int) - sources[index]).mean() < 8


@pytest.mark.parametrize("fmt,quality", [(".jpg", 95), (".jpg", 30), (".png", 0), (".png", 9)])
def test_pack_img_round_trip(fmt, quality):
    pytest.importorskip("cv2")
    img = generators.fixture_images()[3]
    header, decoded = recordio.unpack_img(recordio.pack_img(IRHeader(0, 1.0, 9, 0), img, quality, fmt))
    assert header.id == 9 and decoded.shape == img.shape
    error = np.abs(decoded.astype(int) - img).mean()
    assert error == 0 if fmt == ".png" else error < (4 if quality > 90 else 15)


def test_pack_img_bad_arguments():
    pytest.importorskip("cv2")
    img = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ConfigError, match=r"'\.gif'"):
        recordio.pack_img(IRHeader(0, 0, 0, 0), img, img_fmt=".gif")
    with pytest.raises(ConfigError, match=r"0\.\.9 \(higher means 9\), got -1"):
        recordio.pack_img(IRHeader(0, 0, 0, 0), img, quality=-1, img_fmt=".png")
    assert recordio.pack_img(IRHeader(0, 0, 0, 0), img, 95, ".png") == recordio.pack_img(
        IRHeader(0, 0, 0, 0), img, 9, ".png")
    with pytest.raises(FormatError, match="could not decode 5 bytes"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 0, 0, 0), b"abcde"))


def test_unknown_key_and_bad_index_lines(tmp_path):
    rec, idx = tmp_path / "k.rec", tmp_path / "k.idx"
    with recordio.MXIndexedRecordIO(str(idx), str(rec), "w") as writer:
        writer.write_idx(1, b"one")
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    with pytest.raises(RecordKeyError, match="key 2 is not in the index"):
        reader.read_idx(2)
    idx.write_text("1\tnot-a-number\n")
    with pytest.raises(FormatError, match="line 1"):
        recordio.MXIndexedRecordIO(str(idx), str(rec), "r")


def test_string_keys(tmp_path):
    rec, idx = tmp_path / "s.rec", tmp_path / "s.idx"
    with recordio.MXIndexedRecordIO(str(idx), str(rec), "w", key_type=str) as writer:
        for name in ("cat", "dog"):
            writer.write_idx(name, name.encode() * 3)
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r", key_type=str)
    assert reader.read_idx("dog") == b"dogdogdog" and reader.read_idx("cat") == b"catcatcat"
