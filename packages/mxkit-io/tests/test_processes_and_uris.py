"""Readers re-open after fork and pickling; URIs go through fsspec."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import pytest
from mxkit.core.errors import MXKitError
from mxkit.io import recordio
from mxkit_io_test_helpers import read_all


def _write(path, count):
    with recordio.MXIndexedRecordIO(str(path) + ".idx", str(path), "w") as writer:
        for i in range(count):
            writer.write_idx(i, f"record {i}".encode() * (i + 1))


def _read_all_in_child(reader):
    return read_all(reader)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_workers_get_their_own_position(tmp_path):
    path = tmp_path / "f.rec"
    _write(path, 20)
    reader = recordio.MXRecordIO(str(path), "r")
    assert reader.read() == b"record 0"  # the parent has moved its (shared) file offset
    context = multiprocessing.get_context("fork")
    pool = context.Pool(2)
    try:
        results = pool.map(_read_all_in_child, [reader, reader])
    finally:
        # close + join, not the context manager's terminate(): terminate races with the pool's
        # own thread that replaces exited workers, and a worker forked during that race was
        # left waiting for a task forever (seen in a random-order run of the whole suite)
        pool.close()
        pool.join()
    expected = [f"record {i}".encode() * (i + 1) for i in range(20)]
    assert results == [expected, expected]  # pickled readers re-open at the start
    # The parent's own position is untouched by the children.
    assert reader.read() == expected[1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_inherited_reader_resets_after_fork(tmp_path):
    path = tmp_path / "g.rec"
    _write(path, 5)
    reader = recordio.MXRecordIO(str(path), "r")
    reader.read()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child uses the inherited object directly
        try:
            ok = reader.read() == b"record 0"
        except BaseException:
            ok = False
        os.write(write_end, b"1" if ok else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read_end, 1) == b"1"
    assert reader.read() == b"record 1record 1"


def test_writer_refuses_another_process(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    writer.pid = -1  # as seen from a forked child
    with pytest.raises(MXKitError, match="cannot be written from process"):
        writer.write(b"x")


def test_pickle_round_trip_of_indexed_reader(tmp_path):
    path = tmp_path / "p.rec"
    _write(path, 4)
    reader = recordio.MXIndexedRecordIO(str(path) + ".idx", str(path), "r")
    clone = pickle.loads(pickle.dumps(reader))
    assert clone.read_idx(3) == reader.read_idx(3) == b"record 3" * 4


def test_memory_uri_write_and_read():
    pytest.importorskip("fsspec")
    uri = "memory://mxkit-io-test/data.rec"
    with recordio.MXIndexedRecordIO(uri[:-4] + ".idx", uri, "w") as writer:
        for i in range(6):
            writer.write_idx(i, bytes([i]) * (i * 3))
    reader = recordio.MXIndexedRecordIO(uri[:-4] + ".idx", uri, "r")
    assert reader.read_idx(4) == bytes([4]) * 12
    reader.reset()
    assert read_all(reader) == [bytes([i]) * (i * 3) for i in range(6)]


def test_file_uri(tmp_path):
    path = tmp_path / "u.rec"
    _write(path, 3)
    assert read_all(recordio.MXRecordIO(f"file://{path}", "r"))[2] == b"record 2" * 3


def test_missing_fsspec_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_fsspec(name, *args, **kwargs):
        if name == "fsspec":
            raise ModuleNotFoundError("No module named 'fsspec'", name="fsspec")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(MXKitError, match=r"pip install mxkit-io\[fsspec\]"):
        recordio.MXRecordIO("s3://bucket/data.rec", "r")


def test_sharded_reading_through_fsspec():
    pytest.importorskip("fsspec")
    from mxkit.io.sharding import iter_part_records

    uri = "memory://mxkit-io-test/shards.rec"
    payloads = [bytes([i % 251]) * (i * 37 % 500) for i in range(40)]
    with recordio.MXRecordIO(uri, "w") as writer:
        for payload in payloads:
            writer.write(payload)
    seen = [p for part in range(3) for _, p in iter_part_records(uri, 3, part)]
    assert seen == payloads
