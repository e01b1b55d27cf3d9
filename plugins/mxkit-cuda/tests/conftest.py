"""GPU tests are marked ``gpu`` and skipped, with the reason, on machines without a usable GPU."""

import os
import sys

import pytest
from mxkit_cuda.device import cuda_unavailable_reason

sys.path.insert(0, os.path.dirname(__file__))  # gpu_harness (tests run with --import-mode=importlib)


def pytest_collection_modifyitems(config, items):
    reason = cuda_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def strict_float32():
    """Comparisons with the CPU run with TF32 off (cuDNN's float32 in full precision)."""
    import mxkit_cuda.cudnn  # noqa: F401  (registers config cuda_tf32)
    from mxkit.core import config

    with config.override(cuda_tf32=False):
        yield
