"""Damaged files fail loudly with their offset; shards cover every record exactly once."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ConfigError, FormatError
from mxkit.io import recordio
from mxkit.io._format import MAGIC_BYTES
from mxkit.io.sharding import iter_part_records, part_byte_range, part_record_offsets
from mxkit.io.verify import rebuild_index, verify_record_file
from mxkit_io_test_helpers import generators, read_all


@pytest.fixture
def plain_file(tmp_path):
    """The fixture payloads written by us, with the offset of every record."""
    path = tmp_path / "plain.rec"
    offsets = []
    with recordio.MXRecordIO(str(path), "w") as writer:
        for payload in generators.plain_payloads():
            offsets.append(writer.tell())
            writer.write(payload)
    return path, offsets


def test_truncated_file_reports_the_offset(plain_file):
    path, offsets = plain_file
    data = path.read_bytes()
    path.write_bytes(data[:-100])  # inside the last (9000-byte) record
    reader = recordio.MXRecordIO(str(path), "r")
    with pytest.raises(FormatError, match=rf"offset {offsets[-1]}: truncated record: .*9000 payload bytes"):
        read_all(reader)


def test_truncated_header(plain_file):
    path, _ = plain_file
    size = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(MAGIC_BYTES[:3])
    with pytest.raises(FormatError, match=rf"offset {size}: truncated record header \(3 of 8"):
        read_all(recordio.MXRecordIO(str(path), "r"))


def test_bad_magic_reports_offset(plain_file):
    path, offsets = plain_file
    data = bytearray(path.read_bytes())
    data[offsets[3]] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = recordio.MXRecordIO(str(path), "r")
    with pytest.raises(FormatError, match=rf"offset {offsets[3]}: bad magic 0xCED723F5"):
        read_all(reader)


def test_split_record_missing_its_last_part(tmp_path):
    path = tmp_path / "split.rec"
    with recordio.MXRecordIO(str(path), "w") as writer:
        writer.write(b"abcd" + MAGIC_BYTES + b"efgh")
        writer.write(b"next")
    data = path.read_bytes()
    # Drop the last part (header + 4 bytes): a whole record now follows a first part.
    path.write_bytes(data[:12] + data[24:])
    with pytest.raises(FormatError, match="offset 12: a whole record inside the split record at 0"):
        read_all(recordio.MXRecordIO(str(path), "r"))
    path.write_bytes(data[12:])  # starts with a last part
    with pytest.raises(FormatError, match=r"offset 0: a continuation part \(cflag 3\)"):
        read_all(recordio.MXRecordIO(str(path), "r"))
    path.write_bytes(data[:12])
    with pytest.raises(FormatError, match="offset 0: the file ends inside a split record"):
        read_all(recordio.MXRecordIO(str(path), "r"))


def test_index_entry_past_the_end(plain_file, tmp_path):
    path, offsets = plain_file
    idx = tmp_path / "plain.idx"
    idx.write_text("".join(f"{i}\t{o}\n" for i, o in enumerate(offsets)) + f"99\t{path.stat().st_size + 8}\n")
    reader = recordio.MXIndexedRecordIO(str(idx), str(path), "r")
    assert reader.read_idx(5) == generators.plain_payloads()[5]
    with pytest.raises(FormatError, match=rf"key 99 points at byte offset {path.stat().st_size + 8}.*size"):
        reader.read_idx(99)


def test_index_entry_not_at_a_record_head(plain_file, tmp_path):
    path, offsets = plain_file
    idx = tmp_path / "plain.idx"
    idx.write_text(f"0\t{offsets[2] + 4}\n")
    reader = recordio.MXIndexedRecordIO(str(idx), str(path), "r")
    with pytest.raises(FormatError, match=rf"offset {offsets[2] + 4}: bad magic"):
        reader.read_idx(0)


def test_verify_lists_every_damaged_record_and_resynchronises(plain_file):
    path, offsets = plain_file
    data = bytearray(path.read_bytes())
    data[offsets[2]] ^= 1
    data[offsets[10] + 1] ^= 1
    path.write_bytes(bytes(data))
    report = verify_record_file(str(path))
    assert [p.offset for p in report.problems] == [offsets[2], offsets[10]]
    assert all("bad magic" in p.reason for p in report.problems)
    # a record followed by a damaged header is not counted intact: its own length field
    # may be what is wrong (see test_a_short_length_field_is_caught)
    assert f"after the record at byte offset {offsets[1]}" in report.problems[0].reason
    assert report.records == len(offsets) - 4


def test_verify_checks_the_index(plain_file, tmp_path):
    path, offsets = plain_file
    good = verify_record_file(str(path))
    assert good.ok and good.records == len(offsets)
    idx = tmp_path / "plain.idx"
    idx.write_text(f"0\t{offsets[0]}\n1\t{offsets[1] + 4}\n2\t999999\n")
    report = verify_record_file(str(path), str(idx))
    assert [p.offset for p in report.problems] == [offsets[1] + 4, 999999]
    assert "past the end" in report.problems[1].reason


def test_rebuild_index_matches_mxnets_index(tmp_path):
    from mxkit_io_test_helpers import FIXTURES

    rec = tmp_path / "copy.rec"
    rec.write_bytes((FIXTURES / "mxnet_indexed.rec").read_bytes())
    written, problems = rebuild_index(str(rec))
    assert written == 12 and not problems
    assert (tmp_path / "copy.idx").read_text() == (FIXTURES / "mxnet_indexed.idx").read_text()
    with pytest.raises(ConfigError, match="'id'"):
        rebuild_index(str(rec), key="name")


def _write_random_file(path, sizes, seed):
    rng = np.random.default_rng(seed)
    payloads = []
    with recordio.MXRecordIO(str(path), "w") as writer:
        for index, size in enumerate(sizes):
            payload = rng.bytes(size)
            if index % 3 == 0:  # split records too
                payload = MAGIC_BYTES + payload + MAGIC_BYTES
            payloads.append(payload)
            writer.write(payload)
    return payloads


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=0, max_size=40), st.integers(1, 12), st.integers(0, 99))
def test_parts_cover_every_record_exactly_once(tmp_path_factory, sizes, num_parts, seed):
    path = tmp_path_factory.mktemp("shard") / "s.rec"
    payloads = _write_random_file(path, sizes, seed)
    seen = []
    previous_end = 0
    for part in range(num_parts):
        begin, end = part_byte_range(str(path), num_parts, part)
        assert begin == previous_end  # contiguous, disjoint
        previous_end = end
        records = [payload for _, payload in iter_part_records(str(path), num_parts, part)]
        assert len(records) == len(part_record_offsets(str(path), num_parts, part))
        seen.extend(records)
    assert previous_end == path.stat().st_size
    assert seen == payloads


def test_part_arguments_are_checked(plain_file):
    path, _ = plain_file
    with pytest.raises(ConfigError, match=r"part_index must be in 0\.\.2 for num_parts=3, got 3"):
        part_byte_range(str(path), 3, 3)
    with pytest.raises(ConfigError, match="num_parts must be at least 1, got 0"):
        part_byte_range(str(path), 0, 0)


@pytest.mark.parametrize("buffering", [0, 16, 1024, 1 << 16])
def test_reader_with_any_buffer_size(tmp_path, buffering):
    import mxkit.io._format as fmt

    path = tmp_path / "big.rec"
    payloads = _write_random_file(path, [5000, 10, 700, 4096, 3, 0, 1 << 17], seed=1)
    with open(path, "rb", buffering=buffering) as handle:
        reader = fmt.RecordReader(handle, str(path))
        assert read_all(reader) == payloads
        reader.seek(0)
        assert reader.read() == payloads[0]


def test_head_scan_across_chunk_boundaries(tmp_path, monkeypatch):
    import mxkit.io._format as fmt

    monkeypatch.setattr(fmt, "SEQUENTIAL_CHUNK_BYTES", 64)
    path = tmp_path / "heads.rec"
    payloads = _write_random_file(path, [50, 10, 70, 0, 3, 200, 1], seed=2)
    with open(path, "rb") as handle:
        heads = list(fmt.iter_record_heads(handle))
    assert len(heads) == len(payloads) and struct.unpack("<I", path.read_bytes()[:4])[0] == 0xCED7230A
    reader = recordio.MXRecordIO(str(path), "r")
    offsets = []
    while True:
        offsets.append(reader.tell())
        if reader.read() is None:
            break
    assert heads == offsets[:-1]
