"""One deterministic training step of a bound executor (shared by the recomputation tests)."""

import numpy as np
from mxkit import ndarray as nd


def fill_and_step(exe, seed=0, label_high=None):
    """Fill every argument from ``seed`` (labels below ``label_high``, default the batch size),
    reset the moving statistics, reseed the device generators, run forward and backward."""
    rng = np.random.default_rng(seed)
    for name, array in exe.arg_dict.items():
        if name == "softmax_label":
            array[:] = rng.integers(0, array.shape[0] if label_high is None else label_high, size=array.shape)
        else:
            array[:] = rng.normal(scale=0.3, size=array.shape)
    for name, array in exe.aux_dict.items():
        array[:] = 1.0 if name.endswith("var") else 0.0
    nd.random.seed(seed)
    exe.forward(is_train=True)
    exe.backward()
    return exe
