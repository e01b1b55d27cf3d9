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
