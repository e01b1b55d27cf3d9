"""Every RecordIO loader turns malformed input into a FormatError naming the file and
offset: short length fields, invalid UTF-8 in an index, and byte mutations (fuzzed)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import FormatError
from mxkit.io import MXIndexedRecordIO, MXRecordIO
from mxkit.io._format import MAGIC_BYTES
from mxkit.io.verify import verify_record_file

PAYLOADS = [b"alpha", b"x" * 37, b"gamma" + MAGIC_BYTES + b"split", b"", b"last record"]


@pytest.fixture
def indexed(tmp_path):
    rec, idx = tmp_path / "data.rec", tmp_path / "data.idx"
    with MXIndexedRecordIO(str(idx), str(rec), "w") as writer:
        for key, payload in enumerate(PAYLOADS):
            writer.write_idx(key, payload)
    offsets = [int(line.split("\t")[1]) for line in idx.read_text().splitlines()]
    return rec, idx, offsets


def read_all(path):
    reader = MXRecordIO(str(path), "r")
    try:
        out = []
        while (record := reader.read()) is not None:
            out.append(record)
        return out
    finally:
        reader.close()


@pytest.mark.parametrize("shorter_by", [1, 4, 5, 8])
def test_a_length_field_shorter_than_the_truth_is_caught(indexed, shorter_by):
    rec, _, offsets = indexed
    data = bytearray(rec.read_bytes())
    at = offsets[1]  # the 37-byte record
    (lrec,) = struct.unpack_from("<I", data, at + 4)
    struct.pack_into("<I", data, at + 4, lrec - shorter_by)
    rec.write_bytes(bytes(data))
    reader = MXRecordIO(str(rec), "r")
    assert reader.read() == b"alpha"
    with pytest.raises(FormatError, match=rf"data.rec' at byte offset \d+: .*after the record at byte offset {at}, "
                                          rf"which declares {37 - shorter_by} payload bytes"):
        reader.read()  # never the short payload
    report = verify_record_file(str(rec))
    assert not report.ok and report.records == len(PAYLOADS) - 1  # the short record is not intact


def test_the_last_record_is_checked_too(indexed):
    rec, _, offsets = indexed
    data = bytearray(rec.read_bytes())
    (lrec,) = struct.unpack_from("<I", data, offsets[-1] + 4)
    struct.pack_into("<I", data, offsets[-1] + 4, lrec - 4)
    rec.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=rf"after the record at byte offset {offsets[-1]}"):
        read_all(rec)


def test_an_index_that_is_not_utf8_is_a_format_error(indexed):
    rec, idx, _ = indexed
    idx.write_bytes(b"0\t0\n1\t\xff\xfe12\n")
    with pytest.raises(FormatError, match=r"data.idx' line 2 \(byte offset 6\) is not UTF-8"):
        MXIndexedRecordIO(str(idx), str(rec), "r")
    report = verify_record_file(str(rec), str(idx))
    assert any("line 2 (byte offset 6) is not UTF-8" in p.reason for p in report.problems)


def test_the_chained_read_idiom_works(indexed):
    rec, _, _ = indexed
    assert MXRecordIO(str(rec), "r").read() == b"alpha"


def _mutated(data: bytes, draw) -> bytes:
    raw = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        raw = raw[:draw(st.integers(0, len(raw)))]
    return bytes(raw)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_record_files_only_raise_format_errors(indexed, data):
    rec, idx, _ = indexed
    original = rec.read_bytes()
    mutated = rec.with_name("mutated.rec")
    mutated.write_bytes(_mutated(original, data.draw))
    try:
        records = read_all(mutated)
    except FormatError:
        records = None
    report = verify_record_file(str(mutated))
    if records is not None:  # read in full without an error: verify agrees it is whole
        assert report.ok and report.records == len(records)
    try:
        reader = MXIndexedRecordIO(str(idx), str(mutated), "r")
        for key in reader.keys:
            reader.read_idx(key)
    except FormatError:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_index_files_only_raise_format_errors(indexed, data):
    rec, idx, _ = indexed
    mutated = idx.with_name("mutated.idx")
    mutated.write_bytes(_mutated(idx.read_bytes(), data.draw))
    try:
        reader = MXIndexedRecordIO(str(mutated), str(rec), "r")
        for key in reader.keys:
            reader.read_idx(key)
    except FormatError:
        pass
    verify_record_file(str(rec), str(mutated))  # reports, never raises
