"""Gluon layers accept the parameter ranges MXNet accepts."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import nn
from mxkit.gluon.parameter import GluonError


def test_dropout_rate_one_drops_everything_in_training_only():
    layer = nn.Dropout(1)
    x = mx.nd.ones((2, 3))
    np.testing.assert_array_equal(layer(x).asnumpy(), np.ones((2, 3)))
    with mx.autograd.record():
        out = layer(x)
    np.testing.assert_array_equal(out.asnumpy(), np.zeros((2, 3)))
    with pytest.raises(GluonError, match=r"\[0, 1\]"):
        nn.Dropout(1.5)
