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


def test_memplan_compares_every_strategy_against_the_lower_bound(tmp_path, capsys):
    from mxkit import symbol as sym
    from mxkit.core import plugins

    net = sym.FullyConnected(sym.Activation(sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=8,
                                                            name="c1"), act_type="relu"), num_hidden=10, name="fc")
    path = tmp_path / "net-symbol.json"
    sym.SoftmaxOutput(net, name="softmax").save(str(path))
    assert main(["memplan", str(path), "--shape", "data=16,3,20,20", "--train"]) == 0
    out = capsys.readouterr().out
    rows = {line[:16].strip(): float(line[16:28].replace(",", "")) for line in out.splitlines()[2:]}
    for name in plugins.registry("planner").names():
        assert name == "auto" or name in rows
    assert rows["none"] >= rows["greedy"] >= rows["lower bound"]
    plan = sym.load(str(path)).plan_memory(for_training=True, memplan="greedy", data=(16, 3, 20, 20))
    assert abs(rows["greedy"] - plan.total_bytes / 2**20) < 0.05


@pytest.mark.parametrize("argv, message", [
    (["--shape", "data=1,x"], "positive dimensions"),
    ([], "needs the input shapes"),
    (["--shape", "data=1,3,20,20", "--strategy", "nosuch"], "nosuch"),
])
def test_memplan_bad_input_says_what_is_wrong(tmp_path, capsys, argv, message):
    from mxkit import symbol as sym

    path = tmp_path / "net-symbol.json"
    sym.FullyConnected(sym.Variable("data"), num_hidden=4, name="fc").save(str(path))
    assert main(["memplan", str(path), *argv]) == 2
    assert message in capsys.readouterr().err
