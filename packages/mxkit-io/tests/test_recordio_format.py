"""RecordIO round trips and byte compatibility with MXNet 1.9.1's writer."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import DTypeError, FormatError, MXKitError
from mxkit.io import recordio
from mxkit.io._format import MAGIC_BYTES, encode_record
from mxkit_io_test_helpers import FIXTURES, generators, read_all

MAGIC = MAGIC_BYTES


def write_records(path, payloads):
    with recordio.MXRecordIO(str(path), "w") as writer:
        for payload in payloads:
            writer.write(payload)


def test_mxnet_plain_file_reads_back_exactly():
    reader = recordio.MXRecordIO(str(FIXTURES / "mxnet_plain.rec"), "r")
    assert read_all(reader) == generators.plain_payloads()
    assert reader.read() is None  # stays at the end


def test_writer_output_is_byte_identical_to_mxnet(tmp_path):
    path = tmp_path / "ours.rec"
    write_records(path, generators.plain_payloads())
    assert path.read_bytes() == (FIXTURES / "mxnet_plain.rec").read_bytes()


def test_split_record_layout_follows_dmlc():
    # "abcd" MAGIC "efg": first part "abcd" (cflag 1), last part "efg" (cflag 3) + 1 pad byte.
    pieces = b"".join(encode_record(b"abcd" + MAGIC + b"efg"))
    expected = (
        MAGIC + struct.pack("<I", 1 << 29 | 4) + b"abcd"
        + MAGIC + struct.pack("<I", 3 << 29 | 3) + b"efg\0"
    )
    assert pieces == expected
    # An unaligned magic stays inside a whole record.
    assert b"".join(encode_record(b"ab" + MAGIC)) == MAGIC + struct.pack("<I", 6) + b"ab" + MAGIC + b"\0\0"


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 1023, 1024, 65535, 65536 + 3, 300_000])
def test_round_trip_every_size_class(tmp_path, size):
    rng = np.random.default_rng(size)
    payloads = [rng.bytes(size), b"x" * size, MAGIC * (size // 4) + b"y" * (size % 4)]
    path = tmp_path / "sizes.rec"
    write_records(path, payloads)
    assert path.stat().st_size % 4 == 0
    assert read_all(recordio.MXRecordIO(str(path), "r")) == payloads


_chunks = st.lists(
    st.one_of(st.just(MAGIC), st.binary(max_size=9), st.just(MAGIC[:2]), st.just(MAGIC[2:])), max_size=12
).map(b"".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(_chunks, max_size=8))
def test_round_trip_payloads_made_of_magic_words(tmp_path_factory, payloads):
    path = tmp_path_factory.mktemp("prop") / "p.rec"
    write_records(path, payloads)
    data = path.read_bytes()
    # Every aligned magic in the file is a part header: none survives inside a payload.
    words = np.frombuffer(data, dtype="<u4")
    header_positions = np.flatnonzero(words == 0xCED7230A)
    for position in header_positions:
        assert words[position + 1] >> 29 <= 3
    assert read_all(recordio.MXRecordIO(str(path), "r")) == payloads


def test_tell_and_reset(tmp_path):
    path = tmp_path / "t.rec"
    with recordio.MXRecordIO(str(path), "w") as writer:
        positions = []
        for payload in (b"a", b"bcdefgh", b""):
            positions.append(writer.tell())
            writer.write(payload)
    assert positions == [0, 12, 28]
    reader = recordio.MXRecordIO(str(path), "r")
    assert reader.tell() == 0
    reader.read()
    assert reader.tell() == 12
    reader.reset()
    assert reader.read() == b"a"


def test_write_rejects_text_and_wrong_mode(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(DTypeError, match="bytes, got str"):
        writer.write("text")
    with pytest.raises(MXKitError, match="cannot be read"):
        writer.read()
    writer.close()
    with pytest.raises(MXKitError, match="flag must be 'r'"):
        recordio.MXRecordIO(str(tmp_path / "w.rec"), "a")


def test_record_size_limit():
    class Huge(bytes):
        def __len__(self):
            return 1 << 29

    with pytest.raises(FormatError, match=r"under 2\*\*29"):
        encode_record(Huge(b"x"))


def test_memoryview_and_bytearray_payloads(tmp_path):
    payloads = [b"abc" + MAGIC, b"abcd" + MAGIC + b"!", MAGIC * 3]
    write_records(tmp_path / "bytes.rec", payloads)
    as_int32 = memoryview(np.frombuffer(MAGIC * 3, dtype="<u4"))  # items of 4 bytes, 3 of them
    write_records(tmp_path / "views.rec", [bytearray(payloads[0]), memoryview(payloads[1]), as_int32])
    assert (tmp_path / "views.rec").read_bytes() == (tmp_path / "bytes.rec").read_bytes()
    assert read_all(recordio.MXRecordIO(str(tmp_path / "views.rec"), "r")) == payloads
