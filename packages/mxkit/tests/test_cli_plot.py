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


@pytest.mark.parametrize("name, message", [("memory.svg", "ending in .png"), ("no/such/dir/m.png", "does not exist")])
def test_memplan_plot_path_is_checked_before_planning(tmp_path, capsys, name, message):
    path = saved_network(tmp_path)
    assert main(["memplan", str(path), "--shape", "data=2,3,20,20", "--plot", str(tmp_path / name)]) == 2
    assert message in capsys.readouterr().err
