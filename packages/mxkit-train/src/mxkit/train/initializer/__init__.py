"""Weight initializers (``mx.init``/``mx.initializer``), MXNet 1.x's classes and dispatch.

>>> init = mx.init.Xavier(factor_type="in", magnitude=2.34)
>>> init(mx.init.InitDesc("fc1_weight"), weight)      # fills in place; "fc1_bias" would get 0
>>> init.dumps()
'["xavier", {"rnd_type": "uniform", "factor_type": "in", "magnitude": 2.34}]'
"""

from __future__ import annotations

from mxkit.train.initializer.base import InitDesc, Initializer, Load, Mixed, alias, create, register
from mxkit.train.initializer.distributions import (
    Bilinear,
    Constant,
    LSTMBias,
    MSRAPrelu,
    Normal,
    One,
    Orthogonal,
    Uniform,
    Xavier,
    Zero,
)

__all__ = ["Bilinear", "Constant", "InitDesc", "Initializer", "LSTMBias", "Load", "MSRAPrelu", "Mixed", "Normal",
           "One", "Orthogonal", "Uniform", "Xavier", "Zero", "alias", "create", "register"]
