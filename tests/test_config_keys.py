"""Every configuration key that ``mxkit info`` lists works in a fresh process, from the file and
from the environment, before anything else is imported; a misspelled key fails with the closest
names. Keys are declared through the ``mxkit_options`` hook, so none depends on import order."""

import json
import os
import subprocess
import sys

import pytest

# The child reads every key back: its value must come from the layer the test wrote.
CHILD = """
import json, sys
from mxkit import mx
assert (mx.nd.ones((2,)) * 2).asnumpy().tolist() == [2.0, 2.0]
from mxkit.core import config
expected = json.loads(sys.argv[1])
for key, where in expected.items():
    value, source = config.resolve(key)
    assert where in source, (key, value, source)
print("ok", len(expected))
"""


def _clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("MXKIT_")}


@pytest.fixture(scope="module")
def listed_keys(tmp_path_factory):
    """``{key: (default, owner)}`` of every key in the configuration table of ``mxkit info``."""
    from mxkit.core import config

    out = subprocess.run([sys.executable, "-m", "mxkit.mx", "info"], capture_output=True, text=True, check=True,
                         env=_clean_env(), cwd=tmp_path_factory.mktemp("info"), timeout=120).stdout
    table = out[out.index("\nconfiguration\n"):].splitlines()[4:]
    listed = {}
    specs = config.option_table().specs
    for line in table:
        key, *_, owner = line.split()
        listed[key] = (specs[key].default, owner)
    assert {"engine", "exec_bulk_size", "io_batch_type", "fused_numexpr", "cpu_blas_threads"} <= set(listed)
    assert listed["exec_bulk_size"][1] == "mxkit-symbol" and listed["cpu_blas_threads"][1] == "mxkit-cpu"
    return listed


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def _env_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _run(code_args, env, cwd):
    return subprocess.run([sys.executable, "-c", CHILD, *code_args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)


def test_every_listed_key_in_mxkit_toml_works_in_a_fresh_process(listed_keys, tmp_path):
    (tmp_path / "mxkit.toml").write_text(
        "".join(f"{key} = {_toml_value(default)}\n" for key, (default, _) in listed_keys.items()))
    result = _run([json.dumps(dict.fromkeys(listed_keys, "mxkit.toml"))], _clean_env(), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", str(len(listed_keys))]


def test_every_listed_key_in_pyproject_tool_table_works(listed_keys, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.mxkit]\n" + "".join(f"{key} = {_toml_value(d)}\n" for key, (d, _) in listed_keys.items()))
    result = _run([json.dumps(dict.fromkeys(listed_keys, "[tool.mxkit]"))], _clean_env(), tmp_path)
    assert result.returncode == 0, result.stderr


def test_every_listed_key_in_the_environment_works_in_a_fresh_process(listed_keys, tmp_path):
    env = _clean_env()
    env.update({"MXKIT_" + key.upper(): _env_value(default) for key, (default, _) in listed_keys.items()})
    result = _run([json.dumps({key: "MXKIT_" + key.upper() for key in listed_keys})], env, tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_misspelled_key_in_the_file_fails_with_the_closest_name(tmp_path):
    (tmp_path / "mxkit.toml").write_text("exec_bulk_sise = 4\n")
    result = _run(["{}"], _clean_env(), tmp_path)
    assert result.returncode != 0
    assert "ConfigError: unknown config key 'exec_bulk_sise'" in result.stderr
    assert "did you mean 'exec_bulk_size'?" in result.stderr


def test_a_misspelled_variable_fails_with_the_closest_name(tmp_path):
    result = _run(["{}"], {**_clean_env(), "MXKIT_ENGNE": "naive"}, tmp_path)
    assert result.returncode != 0
    assert "ConfigError: MXKIT_ENGNE: did you mean MXKIT_ENGINE?" in result.stderr


def test_a_bad_value_of_a_plugin_declared_key_names_key_value_source_and_choices(tmp_path):
    (tmp_path / "mxkit.toml").write_text('io_batch_type = "tensor"\n')
    result = _run(["{}"], _clean_env(), tmp_path)
    assert result.returncode != 0
    assert "config key 'io_batch_type' = 'tensor' (from file" in result.stderr
    assert "choices: auto, numpy, ndarray" in result.stderr


def test_every_mxkit_variable_the_project_reads_is_a_key_or_a_listed_non_config_variable():
    # a name used for another purpose that is not on NON_CONFIG_VARIABLES would make every
    # process that sets it fail as a misspelled key
    import re
    from pathlib import Path

    from mxkit.core import config

    root = Path(__file__).resolve().parents[1]
    files = [*root.glob("packages/*/src/**/*"), *root.glob("plugins/*/src/**/*"), *root.glob("benchmarks/**/*"),
             *root.glob("examples/**/*"), *root.glob("docs/**/*"), *root.glob("packages/*/README.md"),
             *root.glob("plugins/*/README.md"), root / "README.md", root / "noxfile.py", root / "tox.ini"]
    used = set()
    for path in files:
        if path.is_file() and path.suffix in (".py", ".md", ".toml", ".ini", ".cfg", ".sh", ".yml", ".yaml"):
            used |= set(re.findall(r"\bMXKIT_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
    declared = {spec.env_var for spec in config.option_table().specs.values()}
    assert used, "the scan found no MXKIT_ names at all"
    # names the docs use as examples: the misspelling of the error message, and the key of the
    # imaginary OpenCL plugin in the mxkit_options hookspec
    examples = {"MXKIT_ENGNE", "MXKIT_OPENCL_PLATFORM"}
    assert sorted(used - declared - config.NON_CONFIG_VARIABLES - examples) == []
