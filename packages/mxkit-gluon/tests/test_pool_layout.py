"""Pooling layers in channel-last layouts (NWC, NHWC, NDHWC) equal the channel-first layer on
transposed data, outputs and input gradients, imperative and hybridized (exact: the same
operator runs on the same numbers)."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, nn

CASES = [
    (nn.MaxPool1D, {"pool_size": 3, "strides": 2}, (2, 9, 3), "NWC"),
    (nn.AvgPool1D, {"count_include_pad": False, "padding": 1}, (1, 7, 2), "NWC"),
    (nn.MaxPool2D, {"pool_size": 3, "strides": 2, "ceil_mode": True}, (2, 6, 7, 3), "NHWC"),
    (nn.AvgPool2D, {"padding": 1}, (1, 5, 5, 4), "NHWC"),
    (nn.GlobalMaxPool2D, {}, (2, 4, 3, 5), "NHWC"),
    (nn.AvgPool3D, {}, (1, 4, 4, 6, 2), "NDHWC"),
    (nn.GlobalAvgPool1D, {}, (3, 5, 2), "NWC"),
]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("cls, kwargs, shape, layout", CASES)
def test_channel_last_pooling_equals_channel_first_on_transposed_data(cls, kwargs, shape, layout, hybridize):
    rng = np.random.RandomState(1)
    data = rng.uniform(-1, 1, shape).astype(np.float32)
    to_first = (0, len(shape) - 1, *range(1, len(shape) - 1))
    to_last = (0, *range(2, len(shape)), 1)
    last, first = cls(layout=layout, **kwargs), cls(**kwargs)
    if hybridize:
        last.hybridize()
    x_last, x_first = mx.nd.array(data), mx.nd.array(data.transpose(to_first))
    x_last.attach_grad()
    x_first.attach_grad()
    with mx.autograd.record():
        y_last, y_first = last(x_last), first(x_first)
    head = rng.uniform(-1, 1, y_last.shape).astype(np.float32)
    y_last.backward(mx.nd.array(head))
    y_first.backward(mx.nd.array(head.transpose(to_first)))
    np.testing.assert_array_equal(y_last.asnumpy(), y_first.asnumpy().transpose(to_last))
    np.testing.assert_array_equal(x_last.grad.asnumpy(), x_first.grad.asnumpy().transpose(to_last))


def test_a_layout_of_the_wrong_rank_is_refused():
    with pytest.raises(GluonError, match="layout must be 'NCHW' or 'NHWC', got 'NWC'"):
        nn.MaxPool2D(layout="NWC")
