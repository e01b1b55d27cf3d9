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


def _deep_net_file(tmp_path):
    from mxkit import symbol as sym

    net = sym.Variable("data")
    for i in range(8):  # deep enough that a recomputing planner recomputes something
        net = sym.Activation(sym.FullyConnected(net, num_hidden=512, name=f"fc{i}"), act_type="tanh", name=f"t{i}")
    path = tmp_path / "deep-symbol.json"
    sym.SoftmaxOutput(sym.FullyConnected(net, num_hidden=10, name="out"), name="softmax").save(str(path))
    return path


def test_memplan_reports_one_lower_bound_the_plain_graphs(tmp_path, capsys):
    from mxkit import symbol as sym

    path = _deep_net_file(tmp_path)
    assert main(["memplan", str(path), "--shape", "data=256,512", "--train"]) == 0
    out = capsys.readouterr().out
    rows = {line[:16].strip(): line[16:] for line in out.splitlines()[2:]}
    plain = sym.load(str(path)).plan_memory(for_training=True, memplan="greedy", data=(256, 512))
    assert abs(float(rows["lower bound"].split()[0].replace(",", "")) - plain.lower_bound_bytes / 2**20) < 0.05
    for name, row in rows.items():
        if name == "lower bound":
            continue
        mib, ratio = (float(v.replace(",", "")) for v in row.split()[:2])
        # every ratio is against that one bound (MiB are rounded to 0.1 in the table)
        assert abs(ratio - mib * 2**20 / plain.lower_bound_bytes) < 0.02 + 0.06 * 2**20 / plain.lower_bound_bytes
        if "recomputes" not in row:
            assert ratio >= 0.995  # only recomputation can beat the bound of the plain graph


@pytest.mark.parametrize("argv, message", [
    (["--shape", "foo=1,2"], "has no input named 'foo'; its inputs are data"),
    (["--shape", "data=1,2"], "do not fit the network"),
])
def test_memplan_errors_speak_command_line_and_come_alone(tmp_path, capsys, argv, message):
    from mxkit import symbol as sym

    path = tmp_path / "conv-symbol.json"
    sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=4, name="conv").save(str(path))
    assert main(["memplan", str(path), *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "simple_bind" not in captured.err
    assert captured.out == ""  # nothing printed before the error


def test_memplan_picture_uses_the_tables_bound(tmp_path):
    from mxkit import symbol as sym
    from mxkit.memplan.picture import memory_picture

    path = _deep_net_file(tmp_path)
    net = sym.load(str(path))
    plain = net.plan_memory(for_training=True, memplan="greedy", data=(256, 512))
    recomputing = net.plan_memory(for_training=True, memplan="sublinear", data=(256, 512))
    picture = memory_picture(plain, compare=[recomputing])
    assert picture.lower_bound_bytes == plain.lower_bound_bytes
    assert picture.arenas[1].ratio_to_lower_bound == pytest.approx(recomputing.total_bytes / plain.lower_bound_bytes)


def test_version_names_the_installed_distribution(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"mxkit {version('mxkit')}"


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # `mxkit info | head`: the reader closes the pipe; no BrokenPipeError traceback, a shell's 141
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before the command writes a byte
    try:
        done = subprocess.run([sys.executable, "-m", "mxkit.mx", "info"], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141
