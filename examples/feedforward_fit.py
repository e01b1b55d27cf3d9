"""The seed's training call, as written: ``mx.model.FeedForward(...).fit(...)`` on two devices.

Trains the MLP of ``mlp_symbol.py`` on scikit-learn's digits and checkpoints every epoch
with ``mx.callback.do_checkpoint`` (``model_-symbol.json``, ``model_-0001.params``...).

    python examples/feedforward_fit.py [--epochs 10] [--prefix DIR/model_]

Without ``--prefix`` the checkpoints go to a temporary folder that is removed at the end.
"""

import argparse
import logging
import os
import tempfile

import numpy as np
from mlp_symbol import mlp
from mxkit import mx
from sklearn.datasets import load_digits


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--prefix", default=None, help="keep the checkpoints at PREFIX-NNNN.params")
    args = parser.parse_args()
    if args.prefix is None:
        with tempfile.TemporaryDirectory() as folder:
            train(args.epochs, os.path.join(folder, "model_"))
        print("(the checkpoints were in a temporary folder, now removed: pass --prefix to keep them)")
    else:
        train(args.epochs, args.prefix)


def train(epochs, prefix):
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.float32)
    train_iter = mx.io.NDArrayIter(x[:1400], y[:1400], batch_size=50, shuffle=True)
    val_iter = mx.io.NDArrayIter(x[1400:], y[1400:], batch_size=50)
    network = mlp()

    model = mx.model.FeedForward(ctx=[mx.cpu(0), mx.cpu(1)], symbol=network, num_epoch=epochs,
                                 learning_rate=0.1, momentum=0.9, wd=0.00001,
                                 initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    model.fit(X=train_iter, eval_data=val_iter, kvstore="local",
              epoch_end_callback=mx.callback.do_checkpoint(prefix))
    print(f"validation accuracy {model.score(val_iter):.3f}; checkpoints at {prefix}-NNNN.params")


if __name__ == "__main__":
    main()
