"""The RecordIO writer replaces its file only at close; the chained reader idiom works."""

import gc

import pytest
from mxkit.core import files
from mxkit.io import MXIndexedRecordIO, MXRecordIO


def test_the_old_file_is_what_readers_see_until_the_writer_closes(tmp_path):
    path = str(tmp_path / "data.rec")
    with MXRecordIO(path, "w") as writer:
        writer.write(b"old")
    writer = MXRecordIO(path, "w")
    writer.write(b"new record")
    assert MXRecordIO(path, "r").read() == b"old"
    writer.close()
    assert MXRecordIO(path, "r").read() == b"new record"


def test_a_block_that_raises_keeps_the_old_records_and_index(tmp_path):
    path, idx = str(tmp_path / "data.rec"), str(tmp_path / "data.idx")
    with MXIndexedRecordIO(idx, path, "w") as writer:
        writer.write_idx(0, b"kept")
    with pytest.raises(RuntimeError, match="while packing"):
        with MXIndexedRecordIO(idx, path, "w") as writer:
            writer.write_idx(0, b"half")
            writer.write_idx(1, b"done")
            raise RuntimeError("while packing")
    reader = MXIndexedRecordIO(idx, path, "r")
    assert reader.keys == [0] and reader.read_idx(0) == b"kept"
    reader.close()
    assert [n for n in (tmp_path).iterdir() if files.TEMP_MARKER in n.name] == []


def test_a_writer_dropped_without_close_commits(tmp_path):
    path = str(tmp_path / "data.rec")
    writer = MXRecordIO(path, "w")
    writer.write(b"record")
    del writer
    gc.collect()
    assert MXRecordIO(path, "r").read() == b"record"


def test_reading_from_a_temporary_reader_works(tmp_path):
    path = str(tmp_path / "data.rec")
    with MXRecordIO(path, "w") as writer:
        writer.write(b"first")
        writer.write(b"second")
    # the MXRecordIO is dropped while its read runs: its file must stay open for the call
    assert MXRecordIO(path, "r").read() == b"first"
    read = MXRecordIO(path, "r").read
    assert read() == b"first" and read() == b"second" and read() is None
