"""The ``mxkit`` command line, run in-process."""

import pytest

from mxkit.mx.cli import build_parser, main


def test_info_prints_plugins_and_configuration(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "mxkit plugins" in out and "configuration" in out and "engine" in out


def test_demo_runs(capsys):
    assert main(["demo"]) == 0
    assert "demo" in capsys.readouterr().out


def test_a_command_is_required():
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([])
    assert info.value.code == 2


def test_errors_are_reported_without_traceback(monkeypatch, capsys):
    monkeypatch.setenv("MXKIT_SEED", "not-a-number")
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxkit: error:") and "seed" in err


def test_the_recordio_commands_are_reachable_from_mxkit(tmp_path, capsys):
    from mxkit.io import recordio

    path = tmp_path / "data.rec"
    with recordio.MXRecordIO(str(path), "w") as writer:
        for i, payload in enumerate((b"first", b"second record", b"3")):
            writer.write(recordio.pack(recordio.IRHeader(0, float(i), i, 0), payload))
    assert main(["rec", "index", str(path)]) == 0
    assert (tmp_path / "data.idx").read_text().count("\n") == 3
    assert main(["rec", "verify", str(path)]) == 0
    capsys.readouterr()
    path.write_bytes(path.read_bytes()[:-3])  # cut the last record short
    assert main(["rec", "verify", str(path)]) != 0
    captured = capsys.readouterr()
    assert "offset" in (captured.out + captured.err).lower()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["im2rec", "--help"])
