"""mxkit.core.files: durable replacement of a file (temp + fsync + rename + directory fsync)."""

import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
from mxkit.core import files


def temporaries(directory):
    return sorted(name for name in os.listdir(directory) if files.TEMP_MARKER in name)


def run_in_child(code, target):
    """Run ``code`` in a fresh interpreter with ``target`` (a path) and ``files`` in scope; its
    exit status (3: the write failed with EFBIG or ENOSPC, 4: another OSError).

    A new interpreter rather than os.fork(): the test process may hold threads (an engine's
    workers, Ray's clients) whose locks a forked child would inherit held.
    """
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    program = "\n".join([
        "import errno, os, signal, sys",
        "from mxkit.core import files",
        f"target = {str(target)!r}",
        "try:",
        body,
        "except OSError as exc:",
        "    sys.exit(3 if exc.errno in (errno.EFBIG, errno.ENOSPC) else 4)",
    ])
    done = subprocess.run([sys.executable, "-c", program], check=False, timeout=120)
    return done.returncode


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "model.json"
    files.atomic_write(target, "old")
    files.atomic_write(target, b"new bytes")
    assert target.read_bytes() == b"new bytes"
    assert temporaries(tmp_path) == []


def test_an_error_inside_the_block_keeps_the_old_file(tmp_path):
    target = tmp_path / "a.params"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="half way"):
        with files.atomic_open(target, "wb") as handle:
            handle.write(b"partial")
            raise RuntimeError("half way")
    assert target.read_bytes() == b"old"
    assert temporaries(tmp_path) == []


def test_disk_full_keeps_the_old_file(tmp_path):
    target = tmp_path / "big.bin"
    target.write_bytes(b"old contents")
    status = run_in_child("""
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        files.atomic_write(target, b"x" * 100_000)
        """, target)
    assert status == 3  # the write failed with EFBIG
    assert target.read_bytes() == b"old contents"
    assert temporaries(tmp_path) == []  # the failed writer removed its temporary


def test_a_writer_killed_mid_write_keeps_the_old_file_and_the_next_save_cleans_up(tmp_path):
    target = tmp_path / "states.bin"
    target.write_bytes(b"epoch 1")
    status = run_in_child("""
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed before the rename
        files.atomic_write(target, b"epoch 2" * 1000)
        """, target)
    assert status == -signal.SIGKILL
    assert target.read_bytes() == b"epoch 1"
    assert len(temporaries(tmp_path)) == 1  # what the dead writer left
    files.atomic_write(target, b"epoch 3")
    assert target.read_bytes() == b"epoch 3"
    assert temporaries(tmp_path) == []


def test_a_live_writers_temporary_is_kept(tmp_path):
    target = tmp_path / "x.json"
    parent_pid = os.getppid()  # alive: our parent process
    busy = tmp_path / f".x.json{files.TEMP_MARKER}{parent_pid}-0123456789abcdef"
    busy.write_bytes(b"in progress")
    unrelated = tmp_path / f".other.json{files.TEMP_MARKER}999999999-00"
    unrelated.write_bytes(b"another target's")
    files.atomic_write(target, "{}")
    assert busy.exists() and unrelated.exists()


def test_a_planted_symlink_is_never_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = tmp_path / "out.params"
    # the name the old code used, and the first name this one will try
    (tmp_path / f"out.params.tmp{os.getpid()}").symlink_to(victim)
    tokens = iter(["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(tokens))
    planted = tmp_path / f".out.params{files.TEMP_MARKER}{os.getpid()}-aaaaaaaaaaaaaaaa"
    planted.symlink_to(victim)
    files.atomic_write(target, b"new")
    assert victim.read_bytes() == b"precious"
    assert target.read_bytes() == b"new" and not target.is_symlink()
    assert planted.is_symlink()  # left alone: it belongs to no dead mxkit writer of ours


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = tmp_path / "link.json"
    target.symlink_to(victim)
    files.atomic_write(target, "{}")
    assert victim.read_bytes() == b"precious"
    assert not target.is_symlink() and target.read_text() == "{}"


def test_the_permission_bits_of_the_old_file_are_kept(tmp_path):
    target = tmp_path / "shared.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    files.atomic_write(target, "new")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


def test_streaming_writer_commits_at_close_and_discards_on_request(tmp_path):
    target = tmp_path / "data.rec"
    target.write_bytes(b"old")
    writer = files.AtomicFile(target, "wb")
    writer.write(b"abc")
    assert writer.tell() == 3
    assert target.read_bytes() == b"old"  # readers see the old file until close
    writer.close()
    assert target.read_bytes() == b"abc"
    dropped = files.AtomicFile(target, "wb")
    dropped.write(b"zzz")
    dropped.discard()
    assert target.read_bytes() == b"abc"
    assert temporaries(tmp_path) == []
