"""A Symbol operator parameter given as a numpy scalar type (``dtype=np.float64``, as MXNet
code writes it) is stored under its dtype name."""

import mxkit.symbol as sym
import numpy as np


def test_numpy_scalar_type_parameters_become_dtype_names():
    s = sym.zeros(shape=(2, 3), dtype=np.float64)
    assert s.attr_dict()[s.name]["dtype"] == "float64"
    _, out_types, _ = s.infer_type()
    assert out_types == [np.float64]
