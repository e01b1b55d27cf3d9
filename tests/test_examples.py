"""Every script in examples/ runs as written (short settings) and prints what it promises."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(name, argv, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", [name, *argv])
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_every_example_has_a_test():
    tested = {"ndarray_on_device.py", "mlp_symbol.py", "imperative_sgd_with_executor.py", "kvstore_updater.py",
              "feedforward_fit.py", "gluon_digits.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_ndarray_on_device(monkeypatch, capsys):
    out = _run("ndarray_on_device.py", ["--ctx", "cpu"], monkeypatch, capsys)
    assert "cpu(0) [[3. 3. 3.]" in out


def test_mlp_symbol(monkeypatch, capsys):
    out = _run("mlp_symbol.py", [], monkeypatch, capsys)
    assert "'fc1_weight': (128, 784)" in out and "-> [(100, 10)]" in out
    assert re.search(r"sum 1\.0000", out)  # softmax rows sum to one (to float32 rounding)


def test_imperative_sgd_with_executor_learns(monkeypatch, capsys):
    out = _run("imperative_sgd_with_executor.py", ["--epochs", "3"], monkeypatch, capsys)
    accuracies = [float(a) for a in re.findall(r"held-out accuracy (\d\.\d+)", out)]
    assert len(accuracies) == 3 and accuracies[-1] > 0.7


def test_kvstore_updater(monkeypatch, capsys):
    kvstore = pytest.importorskip("mxkit.kvstore")
    if not hasattr(kvstore, "create"):
        pytest.skip("mxkit.kvstore has no store yet (mx.kv.create)")
    out = _run("kvstore_updater.py", [], monkeypatch, capsys)
    assert "step 3: weight on cpu(1) = [0.09" in out


def test_feedforward_fit_checkpoints_every_epoch(tmp_path, monkeypatch, capsys):
    prefix = tmp_path / "model_"
    out = _run("feedforward_fit.py", ["--epochs", "3", "--prefix", str(prefix)], monkeypatch, capsys)
    assert float(re.search(r"validation accuracy (\d\.\d+)", out).group(1)) > 0.8
    assert (tmp_path / "model_-symbol.json").exists()
    assert [p.name for p in sorted(tmp_path.glob("model_-*.params"))] == [
        "model_-0001.params", "model_-0002.params", "model_-0003.params"]


def test_feedforward_fit_without_a_prefix_leaves_no_folder_behind(tmp_path, monkeypatch, capsys):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp/TemporaryDirectory create
    out = _run("feedforward_fit.py", ["--epochs", "1"], monkeypatch, capsys)
    assert "validation accuracy" in out and "pass --prefix to keep them" in out
    assert list(tmp_path.iterdir()) == []


def test_gluon_digits_trains_a_hybridized_network_and_exports_it(tmp_path, monkeypatch, capsys):
    prefix = tmp_path / "digits"
    out = _run("gluon_digits.py", ["--epochs", "2", "--prefix", str(prefix)], monkeypatch, capsys)
    accuracies = [float(a) for a in re.findall(r"validation accuracy (\d\.\d+)", out)]
    assert len(accuracies) == 2 and accuracies[-1] > 0.8
    assert (tmp_path / "digits-symbol.json").exists() and (tmp_path / "digits-0000.params").exists()
