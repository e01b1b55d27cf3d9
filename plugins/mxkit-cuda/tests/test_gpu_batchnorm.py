"""BatchNorm on ``gpu(0)``, through cuDNN and through the fused CuPy kernels, against the CPU.

Both GPU paths must give the CPU's outputs, gradients and moving statistics (MXNet's biased
variance in the moving average, the inverse standard deviation as the "var" output) for
every parameter combination, including those cuDNN does not serve (global statistics in
backward, an eps under cuDNN's minimum), which go to the fused kernels.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gpu_harness import assert_same_on_gpu
from mxkit.core import config

pytestmark = pytest.mark.gpu

CASES = [
    # shape, axis, fix_gamma, use_global_stats, output_mean_var, eps, train
    ((8, 6, 5, 5), 1, False, False, True, 1e-3, True),
    ((8, 6, 5, 5), 1, True, False, False, 2e-5, True),
    ((8, 6, 5, 5), 1, False, True, True, 1e-3, True),
    ((8, 6, 5, 5), 1, False, False, True, 1e-3, False),
    ((4, 7, 3), -1, False, False, True, 1e-3, True),
    ((16, 12), 1, False, False, False, 1e-3, True),
    ((2, 3, 4, 5, 6), 2, False, False, True, 1e-3, True),
    ((8, 6, 5, 5), 1, False, False, True, 1e-7, True),
]


@pytest.mark.parametrize("path, case", list(itertools.product(("cudnn", "fused"), CASES)))
def test_batchnorm_matches_cpu(path, case):
    shape, axis, fix_gamma, use_global_stats, output_mean_var, eps, train = case
    rng = np.random.default_rng(3)
    channels = shape[axis]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, channels).astype(np.float32)
    beta = rng.standard_normal(channels).astype(np.float32)
    moving = [rng.standard_normal(channels).astype(np.float32), rng.uniform(0.5, 2, channels).astype(np.float32)]
    params = {"axis": axis, "fix_gamma": fix_gamma, "use_global_stats": use_global_stats,
              "output_mean_var": output_mean_var, "eps": eps, "momentum": 0.8}
    with config.override(cuda_batchnorm=path):
        assert_same_on_gpu("BatchNorm", [x, gamma, beta], params, aux=moving, train=train, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("path", ["cudnn", "fused"])
def test_batchnorm_in_float64(path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4, 3, 3))
    args = [x, rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)]
    aux = [np.zeros(4), np.ones(4)]
    with config.override(cuda_batchnorm=path):
        assert_same_on_gpu("BatchNorm", args, {"fix_gamma": False, "output_mean_var": True}, aux=aux,
                           rtol=1e-10, atol=1e-12)
