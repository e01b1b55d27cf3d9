"""``mxkit train`` and ``mxkit predict``: a reduced digits run, two devices, Ctrl-C, resume, bad inputs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from mxkit.core.errors import FormatError
from mxkit.mx.cli import main


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private XDG cache, so the digits are packed there and nothing touches the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _final_accuracy(out: str) -> float:
    match = re.search(r"validation accuracy (\d\.\d+) after", out)
    assert match, out
    return float(match.group(1))


@pytest.mark.slow
def test_a_short_digits_run_packs_the_data_and_reaches_its_accuracy(cache, tmp_path, capsys):
    # the default run is 8 epochs of batch 32; 4 of batch 64 with a fixed seed already pass the 97% it promises
    prefix = tmp_path / "run" / "lenet"
    assert main(["train", "--epochs", "4", "--batch-size", "64", "--seed", "0", "--model-prefix", str(prefix)]) == 0
    out = capsys.readouterr().out
    assert (cache / "mxkit" / "digits" / "digits-train.rec").exists()
    assert (cache / "mxkit" / "digits" / "digits-val.rec").exists()
    assert len(re.findall(r"^epoch \d/4  train-accuracy [\d.]+  train-cross-entropy [\d.]+  val-accuracy [\d.]+  "
                          r"val-cross-entropy [\d.]+  [\d,]+ samples/s", out,
                          re.MULTILINE)) == 4
    for epoch in range(1, 5):
        assert (tmp_path / "run" / f"lenet-{epoch:04d}.params").exists()
    assert f"model saved to {prefix}-symbol.json and {prefix}-0004.params" in out
    assert _final_accuracy(out) >= 0.97
    # the saved model predicts the held-out digits as well as the run said
    assert main(["predict", str(prefix), "4", "digits"]) == 0
    predicted = re.search(r"359 samples; accuracy (\d\.\d+)", capsys.readouterr().out)
    assert predicted and abs(float(predicted.group(1)) - _final_accuracy(out)) < 1e-3


def test_engine_and_memplan_options_apply_to_the_run_only(cache, tmp_path, capsys):
    import mxkit.engine

    before = mxkit.engine.get()
    assert main(["train", "--network", "mlp", "--epochs", "1", "--engine", "naive", "--memplan", "greedy",
                 "--model-prefix", str(tmp_path / "m")]) == 0
    assert mxkit.engine.get() is before
    assert _final_accuracy(capsys.readouterr().out) > 0.5


def test_two_devices_and_a_csv(cache, tmp_path, capsys):
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 3, 150)
    features = np.eye(3)[labels] * 2 + 0.3 * rng.randn(150, 3)
    path = tmp_path / "blobs.csv"
    np.savetxt(path, np.column_stack([labels, features]), delimiter=",", header="label,a,b,c", comments="")
    assert main(["train", "--network", "mlp", "--data", str(path), "--ctx", "cpu:0,cpu:1", "--epochs", "3",
                 "--batch-size", "20", "--model-prefix", str(tmp_path / "blobs")]) == 0
    out = capsys.readouterr().out
    assert "2 devices cpu(0),cpu(1)" in out
    assert _final_accuracy(out) >= 0.9


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "--network", "vgg"], "unknown network 'vgg'; the networks are: mlp, lenet, resnet"),
    (["train", "--data", "nowhere.csv"], "--data 'nowhere.csv': no such file"),
    (["train", "--data", "digits.txt"], "must be 'digits', a .rec file or a .csv file"),
    (["train", "--ctx", "cpu:x"], "'cpu:x' is not a device"),
    (["train", "--epochs", "0"], "--epochs must be at least 1"),
    (["train", "--batch-size", "5000"], "--batch-size must be between 1 and the 1438 training samples"),
    (["train", "--resume", "nothing/here"], "no checkpoint nothing/here-NNNN.params exists"),
    (["train", "--network", "mlp", "--epochs", "1", "--optimizer", "sgdd"], "unknown optimizer 'sgdd'"),
    (["train", "--network", "mlp", "--epochs", "1", "--memplan", "bogus"], "unknown memory planner 'bogus'"),
    (["predict", "nothing/here", "3", "digits"], "symbol file 'nothing/here-symbol.json' does not exist"),
])
def test_bad_inputs_are_clear_errors(cache, argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxkit: error:") and message in err


def test_predicting_samples_of_the_wrong_shape_says_so(cache, tmp_path, capsys):
    prefix = tmp_path / "lenet"
    assert main(["train", "--epochs", "1", "--model-prefix", str(prefix)]) == 0
    np.save(tmp_path / "wrong.npy", np.zeros((3, 1, 5, 5), np.float32))
    assert main(["predict", str(prefix), "1", str(tmp_path / "wrong.npy")]) == 2
    assert "samples of shape (1, 5, 5) do not fit the model" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_stops_after_the_batch_saves_and_resume_continues(cache, tmp_path, capsys):
    prefix = tmp_path / "mlp"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, "-m", "mxkit.mx", "train", "--network", "mlp", "--epochs", "500",
                                "--model-prefix", str(prefix)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("epoch 1/500"):
                break
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    out = "".join(lines) + out
    assert process.returncode == 130, err
    assert "stopping after this batch" in err
    assert "Traceback" not in err
    match = re.search(r"interrupted in epoch (\d+) after batch (\d+)/(\d+); saved (\S+)-(\d{4}).params", out)
    assert match, out
    saved_epoch = int(match.group(5))
    assert match.group(4) == str(prefix) and (tmp_path / f"mlp-{saved_epoch:04d}.params").exists()
    assert saved_epoch < 500
    assert main(["train", "--resume", str(prefix), "--epochs", str(saved_epoch + 1)]) == 0
    resumed = capsys.readouterr().out
    assert f"epoch {saved_epoch + 1}/{saved_epoch + 1}" in resumed
    assert (tmp_path / f"mlp-{saved_epoch + 1:04d}.params").exists()


def test_records_that_are_not_square_images_are_refused(tmp_path):
    from mxkit.io import IRHeader, MXRecordIO, pack
    from mxkit.mx.train_data import read_records

    path = tmp_path / "odd.rec"
    writer = MXRecordIO(str(path), "w")
    writer.write(pack(IRHeader(0, 1.0, 0, 0), bytes(10)))
    writer.close()
    with pytest.raises(FormatError, match=r"record 0 of .* holds 10 raw bytes, not one square grayscale image"):
        read_records(path)


def test_digits_records_hold_scikit_learns_images(cache):
    from mxkit.mx.train_data import pack_digits, read_records
    from sklearn.datasets import load_digits

    train_path, val_path = pack_digits()
    assert train_path.parent == cache / "mxkit" / "digits"
    train, train_labels = read_records(train_path)
    val, val_labels = read_records(val_path)
    assert train.shape == (1438, 1, 8, 8) and val.shape == (359, 1, 8, 8)
    digits = load_digits()
    # every packed image is one of scikit-learn's, with its label, at 255/16 grey levels
    originals = {img.tobytes(): label for img, label in zip(np.rint(digits.images * 255 / 16).astype(np.uint8),
                                                             digits.target)}
    for image, label in zip(np.concatenate([train, val]), np.concatenate([train_labels, val_labels])):
        key = np.rint(image[0] * 255).astype(np.uint8).tobytes()
        assert originals[key] == label


def test_a_new_default_run_never_overwrites_an_earlier_runs_checkpoints(cache):
    from mxkit.mx.train_job import default_prefix

    first = default_prefix("lenet", "digits")
    assert first.name == "lenet-digits" and first.parent == cache / "mxkit" / "models"
    first.parent.mkdir(parents=True)
    (first.parent / "lenet-digits-0003.params").write_bytes(b"")  # an earlier run's epoch
    second = default_prefix("lenet", "digits")
    assert second.name == "lenet-digits-run2"
    (second.parent / "lenet-digits-run2-symbol.json").write_text("{}")  # a run stopped before its first epoch
    assert default_prefix("lenet", "digits").name == "lenet-digits-run3"
    assert default_prefix("mlp", "digits").name == "mlp-digits"  # other networks keep their own names


def test_without_scikit_learn_the_digits_name_the_extra_to_install(tmp_path, monkeypatch):
    import sys

    from mxkit.core.errors import MissingComponentError
    from mxkit.mx.train_data import pack_digits

    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn now raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(MissingComponentError, match=r"pip install 'mxkit\[demo\]'.*--data"):
        pack_digits(tmp_path)


def test_the_facade_declares_the_extras_its_messages_name():
    import tomllib
    from pathlib import Path

    facade = Path(__file__).resolve().parents[1] / "pyproject.toml"
    project = tomllib.loads(facade.read_text())["project"]
    extras = project["optional-dependencies"]
    assert {"demo", "image", "plot", "dist"} <= set(extras)
    assert not any(req.startswith("scikit-learn") for req in project["dependencies"])  # heavy: only with [demo]
    assert any(req.startswith("scikit-learn") for req in extras["demo"])
