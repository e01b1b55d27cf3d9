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
