"""mx.test_utils: environment (including mxkit's cached MXKIT_* values), discard_stderr, and
MNIST from local idx files."""

import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
from mxkit import mx
from mxkit.core import config
from mxkit.core.errors import ConfigError, FormatError, MXKitError
from mxkit.mx import test_utils as tu

# not MXKIT_*: an unknown MXKIT_ variable is a configuration error (a misspelled key)
VARIABLE = "TEST_UTILS_PROBE_OF_MXKIT"


def test_environment_sets_and_restores(monkeypatch):
    monkeypatch.setenv(VARIABLE, "before")
    monkeypatch.delenv(VARIABLE + "_NEW", raising=False)
    with tu.environment({VARIABLE: "inside", VARIABLE + "_NEW": "made"}):
        assert os.environ[VARIABLE] == "inside" and os.environ[VARIABLE + "_NEW"] == "made"
    assert os.environ[VARIABLE] == "before" and VARIABLE + "_NEW" not in os.environ
    with tu.environment(VARIABLE, None):
        assert VARIABLE not in os.environ
    assert os.environ[VARIABLE] == "before"
    with pytest.raises(RuntimeError), tu.environment(VARIABLE, "during an error"):
        raise RuntimeError("restored anyway")
    assert os.environ[VARIABLE] == "before"


def test_a_misspelled_mxkit_variable_fails_before_anything_changes(monkeypatch):
    monkeypatch.delenv("MXKIT_ENGNE", raising=False)
    with pytest.raises(ConfigError, match=r"MXKIT_ENGNE: did you mean MXKIT_ENGINE\?"), \
            tu.environment({"MXKIT_ENGNE": "naive"}):
        pass
    assert "MXKIT_ENGNE" not in os.environ


def test_config_keys_take_effect_inside(monkeypatch):
    monkeypatch.delenv("MXKIT_DEFAULT_DTYPE", raising=False)
    with tu.environment("MXKIT_DEFAULT_DTYPE", "float64"):
        assert config.get("default_dtype") == "float64"
        assert mx.nd.zeros((1,)).dtype == np.float64
    assert mx.nd.zeros((1,)).dtype == np.float32


def test_the_cached_engine_follows_mxkit_engine(monkeypatch):
    import mxkit.engine

    monkeypatch.delenv("MXKIT_ENGINE", raising=False)
    outside = mxkit.engine.get()
    with tu.environment("MXKIT_ENGINE", "naive"):
        inside = mxkit.engine.get()
        assert inside.name == "naive" and inside is not outside
        assert (mx.nd.ones((2,)) * 3).asnumpy().tolist() == [3.0, 3.0]
    assert mxkit.engine.get() is outside


def test_mxnet_variables_with_an_equivalent_set_it(monkeypatch):
    import mxkit.engine
    import mxkit.symbol  # registers backward_do_mirror

    for name in ("MXKIT_ENGINE", "MXNET_ENGINE_TYPE", "MXKIT_BACKWARD_DO_MIRROR", "MXNET_BACKWARD_DO_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    with tu.environment({"MXNET_ENGINE_TYPE": "NaiveEngine", "MXNET_BACKWARD_DO_MIRROR": "1"}):
        assert os.environ["MXNET_ENGINE_TYPE"] == "NaiveEngine"  # set as asked, too
        assert mxkit.engine.get().name == "naive" and config.get("backward_do_mirror") is True
    assert "MXKIT_ENGINE" not in os.environ and "MXKIT_BACKWARD_DO_MIRROR" not in os.environ
    with tu.environment({"MXNET_ENGINE_TYPE": "NaiveEngine", "MXKIT_ENGINE": "threaded"}):
        assert config.get("engine") == "threaded"  # the explicit mxkit value wins
    with pytest.raises(MXKitError, match="MXNET_ENGINE_TYPE='Fast' has no mxkit equivalent; MXNet's values are "
                                         "NaiveEngine, ThreadedEngine, ThreadedEnginePerDevice"):
        with tu.environment("MXNET_ENGINE_TYPE", "Fast"):
            pass


def test_the_engine_follows_mxkit_cpu_workers(monkeypatch):
    import mxkit.engine

    monkeypatch.delenv("MXKIT_CPU_WORKERS", raising=False)
    outside = mxkit.engine.get()
    with tu.environment("MXKIT_CPU_WORKERS", "3"):
        inside = mxkit.engine.get()
        if inside.name != "naive":  # the naive engine has no workers
            assert inside.num_workers == 3
        assert inside is not outside
    assert mxkit.engine.get() is outside


def test_plugin_manager_keys_warn_that_they_need_a_rebuild(monkeypatch):
    from mxkit.core import plugins

    plugins.get_plugin_manager()
    monkeypatch.delenv("MXKIT_TRACE_PLUGINS", raising=False)
    with pytest.warns(UserWarning, match="MXKIT_TRACE_PLUGINS is read when the plugin manager is built"):
        with tu.environment("MXKIT_TRACE_PLUGINS", "1"):
            pass


def test_the_cached_numexpr_mode_follows_mxkit_fused_numexpr(monkeypatch):
    from mxkit.ndarray.ops import fused_elemwise

    monkeypatch.delenv("MXKIT_FUSED_NUMEXPR", raising=False)
    fused_elemwise._numexpr_mode()  # cache the mode as a running program would
    before = fused_elemwise._mode
    with tu.environment("MXKIT_FUSED_NUMEXPR", "never"):
        assert fused_elemwise._numexpr_mode() == "never"
        assert not fused_elemwise.numexpr_available()
    assert fused_elemwise._mode == before


def test_bad_config_values_fail_before_anything_changes(monkeypatch):
    monkeypatch.setenv(VARIABLE, "before")
    with pytest.raises(ConfigError, match=r"'cpu_workers' = 'many'.*not a valid int"):
        with tu.environment({VARIABLE: "changed", "MXKIT_CPU_WORKERS": "many"}):
            pass
    assert os.environ[VARIABLE] == "before"


def test_bad_environment_arguments():
    with pytest.raises(MXKitError, match="one dict of names to values or a name and a value, got 3"):
        with tu.environment("A", "1", "B"):
            pass
    with pytest.raises(MXKitError, match=r"values are strings \(or None to unset\), e.g. '4'"):
        with tu.environment("MXKIT_CPU_WORKERS", 4):
            pass


def test_discard_stderr_silences_the_file_descriptor():
    code = ("import os, sys\n"
            "from mxkit.mx.test_utils import discard_stderr\n"
            "with discard_stderr():\n"
            "    os.write(2, b'hidden-from-c\\n'); print('hidden-from-python', file=sys.stderr)\n"
            "os.write(2, b'shown\\n')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr == "shown\n"


# -- MNIST ------------------------------------------------------------------------------------

def _idx_bytes(array: np.ndarray, code: int) -> bytes:
    """An idx file packed by hand: 0, 0, type code, ndim, big-endian u32 dims, big-endian data."""
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def _write_mnist(directory, train=3, test=2, gz=False):
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, size=(train, 4, 5), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, size=train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, size=(test, 4, 5), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, size=test, dtype=np.uint8),
    }
    for name, array in arrays.items():
        payload = _idx_bytes(array, 0x08)
        if gz:
            with gzip.open(directory / (name + ".gz"), "wb") as handle:
                handle.write(payload)
        else:
            (directory / name).write_bytes(payload)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_get_mnist_reads_local_idx_files(tmp_path, gz):
    arrays = _write_mnist(tmp_path, gz=gz)
    mnist = tu.get_mnist(tmp_path)
    assert mnist["train_data"].shape == (3, 1, 4, 5) and mnist["train_data"].dtype == np.float32
    np.testing.assert_allclose(mnist["train_data"][2, 0], arrays["train-images-idx3-ubyte"][2] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(mnist["test_label"], arrays["t10k-labels-idx1-ubyte"])
    assert mnist["test_label"].dtype == np.int8
    _train, val = tu.get_mnist_iterator(2, (20,), path=tmp_path)
    batch = next(iter(val))
    assert batch.data[0].shape == (2, 20)


def test_read_idx_of_wider_types_and_write_idx(tmp_path):
    values = np.array([[1.5, -2.0], [3.25, 0.0]], dtype=np.float32)
    (tmp_path / "f.idx").write_bytes(_idx_bytes(values, 0x0D))
    np.testing.assert_array_equal(tu.read_idx(tmp_path / "f.idx"), values)
    tu.write_idx(tmp_path / "g.idx", values)
    assert (tmp_path / "g.idx").read_bytes() == (tmp_path / "f.idx").read_bytes()


def test_mnist_files_missing_or_corrupt(tmp_path, monkeypatch):
    with pytest.raises(MXKitError, match=r"train-images-idx3-ubyte .* is not in .*mxkit does not download"):
        tu.get_mnist(tmp_path)
    monkeypatch.delenv("MXKIT_DATA_DIR", raising=False)
    with pytest.raises(MXKitError, match=r"pass path=\.\.\. or set MXKIT_DATA_DIR"):
        tu.get_mnist()
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01")
    with pytest.raises(FormatError, match="not an idx file: it starts with 01020801"):
        tu.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(_idx_bytes(np.zeros(4, np.uint8), 0x08)[:-1])
    with pytest.raises(FormatError, match=r"shape \(4,\) of uint8 needs 4 bytes after the header, the file has 3"):
        tu.read_idx(tmp_path / "short")
    (tmp_path / "code").write_bytes(b"\x00\x00\x07\x00")
    with pytest.raises(FormatError, match="unknown idx type code 0x07"):
        tu.read_idx(tmp_path / "code")
    arrays = _write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(arrays["t10k-labels-idx1-ubyte"][:1], 0x08))
    with pytest.raises(FormatError, match=r"MNIST test files disagree: images \(2, 4, 5\)"):
        tu.get_mnist(tmp_path)
