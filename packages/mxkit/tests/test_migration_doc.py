"""docs/migration.md: every configuration key it names exists, every MXNet variable appears once."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "migration.md"


def _mapping_rows():
    text = DOC.read_text()
    table = text[text.index("| MXNet variable | mxkit | notes |"):]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


@pytest.fixture(scope="module")
def config_keys():
    # every installed component declares its keys through the mxkit_options hook: no imports needed
    from mxkit.core.config import option_table

    keys = set(option_table().specs)
    if "cuda_tf32" not in keys:
        pytest.skip("mxkit-cuda is not installed: cuda_tf32 cannot be checked")
    return keys


def test_every_named_config_key_exists(config_keys):
    named = {key for _variable, mxkit, _notes in _mapping_rows() for key in re.findall(r"^`([a-z_0-9]+)`$", mxkit)}
    assert len(named) >= 9, "the table names too few configuration keys"
    notes = " ".join(row[2] for row in _mapping_rows())
    named |= {key for key in ("mirror_policy", "mirror_segment_mb", "fused_numexpr", "seed", "consistency")
              if f"`{key}`" in notes}
    assert named <= config_keys, f"keys in docs/migration.md that do not exist: {sorted(named - config_keys)}"


def test_each_mxnet_variable_is_mapped_once():
    variables = [v for row in _mapping_rows() for v in re.findall(r"`([A-Z_0-9]+)`", row[0])]
    assert len(variables) == len(set(variables))
    for documented in ("MXNET_ENGINE_TYPE", "MXNET_CPU_WORKER_NTHREADS", "MXNET_EXEC_ENABLE_INPLACE",
                       "MXNET_GPU_MEM_POOL_TYPE", "MXNET_EXEC_BULK_EXEC_TRAIN", "MXNET_BACKWARD_DO_MIRROR",
                       "MXNET_KVSTORE_BIGARRAY_BOUND", "MXNET_KVSTORE_REDUCTION_NTHREADS", "MXNET_UPDATE_ON_KVSTORE"):
        assert documented in variables
    assert all(row[1] for row in _mapping_rows())


def test_the_index_links_the_guide():
    assert "migration" in (DOC.parent / "index.md").read_text()
