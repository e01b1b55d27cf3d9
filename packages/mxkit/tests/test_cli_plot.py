"""``mxkit memplan --plot``: a PNG of every strategy against the live bytes, drawn from the printed plans."""

import pytest
from mxkit.mx.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def saved_network(tmp_path):
    from mxkit import symbol as sym

    net = sym.FullyConnected(sym.Activation(sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=8,
                                                            name="c1"), act_type="relu"), num_hidden=10, name="fc")
    path = tmp_path / "net-symbol.json"
    sym.SoftmaxOutput(net, name="softmax").save(str(path))
    return path


def test_memplan_plot_draws_every_strategy_against_the_live_bytes(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from mxkit import symbol as sym
    from mxkit.memplan import picture

    drawn = []
    real = picture.memory_picture

    def spy(*args, **kwargs):
        drawn.append(real(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(picture, "memory_picture", spy)
    path, png = saved_network(tmp_path), tmp_path / "memory.png"
    argv = ["memplan", str(path), "--shape", "data=16,3,20,20", "--train", "--strategy", "none", "--strategy",
            "mxnet", "--strategy", "greedy", "--plot", str(png)]
    assert main(argv) == 0
    assert f"plot written to {png}" in capsys.readouterr().out
    assert png.read_bytes().startswith(PNG_SIGNATURE) and png.stat().st_size > 5000
    (shown,) = drawn
    net = sym.load(str(path))
    expected = {name: net.plan_memory(for_training=True, memplan=name, data=(16, 3, 20, 20))
                for name in ("none", "mxnet", "greedy")}
    assert {a.strategy: a.total_bytes for a in shown.arenas} == {n: p.total_bytes for n, p in expected.items()}
    assert shown.live_bytes == expected["mxnet"].live_bytes
    # the steps are named after the executed nodes, forward then backward
    assert len(shown.step_names) == len(shown.live_bytes) and shown.step_names[0].endswith(":c1")
    assert "backward" in shown.step_names[-1]


@pytest.mark.parametrize("name, message", [("memory.svg", "ending in .png"), ("no/such/dir/m.png", "does not exist")])
def test_memplan_plot_path_is_checked_before_planning(tmp_path, capsys, name, message):
    path = saved_network(tmp_path)
    assert main(["memplan", str(path), "--shape", "data=2,3,20,20", "--plot", str(tmp_path / name)]) == 2
    assert message in capsys.readouterr().err


def test_train_plot_dir_draws_the_accuracy_the_run_printed(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import re

    from mxkit.mx import train_job

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = []
    real = train_job._metric_plotter
    monkeypatch.setattr(train_job, "_metric_plotter", lambda directory: made.append(real(directory)) or made[-1])
    curves = tmp_path / "curves"
    assert main(["train", "--network", "mlp", "--epochs", "2", "--model-prefix", str(tmp_path / "m"),
                 "--plot-dir", str(curves)]) == 0
    out = capsys.readouterr().out
    combined = curves / "all-metrics.png"
    assert combined.read_bytes().startswith(PNG_SIGNATURE) and f"curves drawn to {combined}" in out
    for metric in ("accuracy", "cross-entropy"):  # one file per metric too, with what the console printed
        png = curves / f"{metric}.png"
        assert png.read_bytes().startswith(PNG_SIGNATURE)
        printed = re.findall(rf"train-{metric} ([\d.]+) .*val-{metric} ([\d.]+)", out)
        series = made[0].series(metric)
        assert series.train_epochs == series.validation_epochs == (0, 1)
        assert [f"{v:.4f}" for v in series.train_values] == [t for t, _ in printed]
        assert [f"{v:.4f}" for v in series.validation_values] == [v for _, v in printed]


def test_train_plot_dir_that_is_a_file_is_refused_before_training(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "taken").write_text("x")
    assert main(["train", "--network", "mlp", "--epochs", "1", "--model-prefix", str(tmp_path / "m"),
                 "--plot-dir", str(tmp_path / "taken")]) == 2
    captured = capsys.readouterr()
    assert "is not a folder" in captured.err and "epoch 1/1" not in captured.out


def test_train_plot_dir_without_matplotlib_names_the_extra_before_training(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["train", "--network", "mlp", "--epochs", "1", "--model-prefix", str(tmp_path / "m"),
                 "--plot-dir", str(tmp_path / "curves")]) == 2
    captured = capsys.readouterr()
    assert "pip install 'mxkit[plot]'" in captured.err and "epoch 1/1" not in captured.out


def test_memplan_plot_without_matplotlib_names_the_extra_before_planning(tmp_path, capsys, monkeypatch):
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = saved_network(tmp_path)
    assert main(["memplan", str(path), "--shape", "data=2,3,20,20", "--plot", str(tmp_path / "m.png")]) == 2
    captured = capsys.readouterr()
    assert "pip install 'mxkit[plot]'" in captured.err and "strategy" not in captured.out
