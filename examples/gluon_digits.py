"""Gluon on scikit-learn's digits: a small convolutional network, hybridized, trained with
``Trainer`` under ``mx.autograd.record()``, then exported as a Symbol checkpoint.

    python examples/gluon_digits.py [--epochs 5] [--prefix DIR/digits]
"""

import argparse
import os
import tempfile

import numpy as np
from mxkit import mx
from mxkit.gluon import Trainer, data, nn
from mxkit.gluon import loss as gloss
from sklearn.datasets import load_digits


def network():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(16, 3, padding=1, activation="relu"), nn.BatchNorm(), nn.MaxPool2D(),
                nn.Flatten(), nn.Dense(64, activation="relu"), nn.Dropout(0.1), nn.Dense(10))
    return net


def accuracy(net, loader):
    correct = total = 0
    for x, y in loader:
        predicted = net(x).asnumpy().argmax(axis=1)
        correct += int((predicted == y.asnumpy()).sum())
        total += len(predicted)
    return correct / total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--prefix", default=os.path.join(tempfile.mkdtemp(), "digits"))
    args = parser.parse_args()

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    labels = digits.target.astype(np.float32)
    train = data.DataLoader(data.ArrayDataset(images[:1400], labels[:1400]), batch_size=50, shuffle=True)
    val = data.DataLoader(data.ArrayDataset(images[1400:], labels[1400:]), batch_size=100)

    mx.random.seed(0)
    np.random.seed(0)
    net = network()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gloss.SoftmaxCrossEntropyLoss()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in train:
            with mx.autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            total += float(loss.sum().asscalar())
        print(f"epoch {epoch}: training loss {total / 1400:.4f}, validation accuracy {accuracy(net, val):.3f}")
    plan = net.memory_plan()
    print(f"planned memory of the hybridized graph: {sum(p.size for p in plan.pools)} bytes "
          f"(lower bound {plan.lower_bound_bytes})")
    symbol_file, params_file = net.export(args.prefix)
    print(f"exported {symbol_file} and {params_file}")


if __name__ == "__main__":
    main()
