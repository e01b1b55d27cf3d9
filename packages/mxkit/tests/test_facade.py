"""The facade: MXNet's short names, imported lazily, with clear errors for missing parts."""

import subprocess
import sys

import pytest
from mxkit import mx
from mxkit.core.errors import MissingComponentError, MXKitError


def test_import_is_lazy():
    code = "import sys; from mxkit import mx; print(sorted(m for m in sys.modules if m.startswith('mxkit.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)
    assert "mxkit.ndarray" not in loaded and "mxkit.symbol" not in loaded
    assert "numpy" not in subprocess.run(
        [sys.executable, "-c", "import sys; from mxkit import mx; print(list(sys.modules))"],
        capture_output=True, text=True, check=True).stdout.split("'")


def test_core_names():
    assert mx.cpu(1) == mx.Context("cpu", 1)
    assert mx.gpu() == mx.Context("gpu", 0)
    assert mx.MXNetError is MXKitError
    assert mx.base.MXNetError is MXKitError
    with mx.cpu(2):
        assert mx.current_context() == mx.cpu(2)


def test_missing_distribution_says_what_to_install(monkeypatch):
    monkeypatch.setitem(mx.LAZY_NAMES, "onnx", ("mxkit.onnx", None, "mxkit-onnx", "pip install mxkit-onnx"))
    monkeypatch.delitem(mx.__dict__, "onnx", raising=False)
    expected = r"mx.onnx needs the mxkit-onnx component.*pip install mxkit-onnx"
    with pytest.raises(MissingComponentError, match=expected):
        _ = mx.onnx
    assert not hasattr(mx, "onnx")  # also an AttributeError


def test_installed_distribution_lacking_a_module_says_to_upgrade(monkeypatch):
    monkeypatch.setitem(mx.LAZY_NAMES, "future", ("mxkit.core.future_module", None, "mxkit-core", "pip install x"))
    with pytest.raises(MissingComponentError, match=r"mxkit-core .* does not provide yet"):
        _ = mx.future


def test_unknown_name_is_an_attribute_error_listing_names():
    with pytest.raises(AttributeError, match="the names are"):
        _ = mx.not_a_name
    assert "nd" in dir(mx) and "sym" in dir(mx)


def test_cli_reports_config_errors_cleanly():
    import os

    env = dict(os.environ, MXKIT_CPU_WORKERS="lots")
    out = subprocess.run([sys.executable, "-m", "mxkit.mx", "info"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert "mxkit: error:" in out.stderr and "cpu_workers" in out.stderr and "Traceback" not in out.stderr


def test_cli_info_shows_sources():
    import os

    env = dict(os.environ, MXKIT_CPU_WORKERS="2")
    out = subprocess.run([sys.executable, "-m", "mxkit.mx", "info"], capture_output=True, text=True, env=env,
                         check=True)
    assert "environment MXKIT_CPU_WORKERS" in out.stdout
    assert "cpu (mxkit-cpu" in out.stdout
