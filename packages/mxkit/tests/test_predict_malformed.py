"""`mxkit predict` on a malformed checkpoint prints the error, not a traceback."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.mx.cli import main


@pytest.mark.parametrize(("symbol_text", "message"), [
    ('{"nodes":[1],"heads":[]}', "symbol JSON node 0 must be an object"),
    ('{"nodes":[],"heads":5}', "'heads' must be a list"),
    ("[" * 50_000 + "]" * 50_000, "nests arrays or objects deeper"),
])
def test_predict_reports_a_malformed_symbol_file(tmp_path, capsys, symbol_text, message):
    prefix = tmp_path / "model"
    (tmp_path / "model-symbol.json").write_text(symbol_text)
    (tmp_path / "model-0001.params").write_bytes(b"")
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    assert main(["predict", str(prefix), "1", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxkit: error:") and message in err and "Traceback" not in err
