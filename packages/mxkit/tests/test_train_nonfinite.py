"""Non-finite values in `mxkit train --data` CSV files: an error naming line and column, or
(with --drop-nonfinite) their rows left out; never a silent scaling by an infinite max."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import FormatError
from mxkit.mx.cli import main
from mxkit.mx.train_data import read_csv


def write_csv(path, rows, header=True):
    lines = (["label,a,b,c"] if header else []) + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


ROWS = [[0, 10, 20, 30], [1, 40, 50, 60], [2, 70, 80, 90], [1, 5, 5, 5]]


@pytest.mark.parametrize(("value", "row", "column", "shown"), [
    ("inf", 1, 2, "inf"), ("-inf", 2, 4, "-inf"), ("nan", 0, 3, "nan"), ("1e39", 3, 2, r"1e\+39"),
    ("nan", 2, 1, "nan"),
])
@pytest.mark.parametrize("header", [True, False])
def test_a_non_finite_value_is_named_by_line_and_column(tmp_path, value, row, column, shown, header):
    rows = [list(r) for r in ROWS]
    rows[row][column - 1] = value
    path = tmp_path / "data.csv"
    write_csv(path, rows, header)
    line = row + 1 + (1 if header else 0)
    what = "the label" if column == 1 else f"feature {column - 1}"
    with pytest.raises(FormatError, match=rf"line {line}, column {column} \({what}\) is {shown}, not a finite "
                                          r"float32 number.*--drop-nonfinite"):
        read_csv(path)


def test_dropping_leaves_the_other_rows_scaled_by_their_finite_max(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[1][2] = "inf"
    path = tmp_path / "data.csv"
    write_csv(path, rows)
    with pytest.warns(UserWarning, match=r"left out 1 row\(s\).*line 3"):
        features, labels = read_csv(path, drop_nonfinite=True)
    kept = np.array([r for i, r in enumerate(ROWS) if i != 1], np.float64)
    np.testing.assert_array_equal(labels, kept[:, 0])
    np.testing.assert_allclose(features, kept[:, 1:] / 90.0, rtol=1e-7)
    assert np.isfinite(features).all()


def test_mxkit_train_reports_it_and_the_flag_trains(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 3, 60)
    features = np.eye(3)[labels] * 2 + 0.3 * rng.randn(60, 3)
    table = np.column_stack([labels, features]).astype(object)
    table[7, 2] = "inf"
    path = tmp_path / "blobs.csv"
    path.write_text("label,a,b,c\n" + "\n".join(",".join(str(v) for v in row) for row in table) + "\n")
    argv = ["train", "--network", "mlp", "--data", str(path), "--epochs", "1", "--batch-size", "10",
            "--model-prefix", str(tmp_path / "blobs")]
    assert main(argv) == 2
    assert "line 9, column 3 (feature 2) is inf" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="left out 1 row"):
        assert main([*argv, "--drop-nonfinite"]) == 0
