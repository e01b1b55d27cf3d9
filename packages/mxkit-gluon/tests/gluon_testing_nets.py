"""Networks shared by the tests, built exactly as tests/fixtures/make_mxnet_fixtures.py builds them."""

from mxkit.gluon import nn


def small_net():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(3, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(), nn.Flatten(),
                nn.Dense(4))
    return net
