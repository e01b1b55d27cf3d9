"""The seed's mixed program: a symbolic executor computes gradients, imperative NDArray code updates.

The MLP of ``mlp_symbol.py`` is bound once; each step copies a batch in, runs
forward/backward on the executor, and updates every weight with NDArray arithmetic
(``weight[:] -= lr * grad``), which the engine orders after the backward pass.

    python examples/imperative_sgd_with_executor.py [--epochs 5]
"""

import argparse

import numpy as np
from mlp_symbol import mlp
from mxkit import mx
from sklearn.datasets import load_digits


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    mx.random.seed(args.seed)  # the initial weights
    np.random.seed(args.seed)  # the iterator's shuffle
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.float32)
    batch, lr = 50, 0.5
    executor = mlp().simple_bind(ctx=mx.cpu(), data=(batch, x.shape[1]))
    init = mx.init.Xavier()
    for name, array in executor.arg_dict.items():
        if name not in ("data", "softmax_label"):
            init(name, array)
    train = mx.io.NDArrayIter(x[:1500], y[:1500], batch, shuffle=True, last_batch_handle="discard")
    for epoch in range(args.epochs):
        train.reset()
        for data_batch in train:
            executor.arg_dict["data"][:] = data_batch.data[0]
            executor.arg_dict["softmax_label"][:] = data_batch.label[0]
            executor.forward(is_train=True)
            executor.backward()
            for name, weight in executor.arg_dict.items():
                if name in ("data", "softmax_label"):
                    continue
                weight[:] -= lr / batch * executor.grad_dict[name]   # imperative update
        correct = 0
        for start in range(1500, len(x) - batch + 1, batch):
            out = executor.forward(is_train=False, data=x[start:start + batch])[0].asnumpy()
            correct += int((out.argmax(axis=1) == y[start:start + batch]).sum())
        print(f"epoch {epoch + 1}: held-out accuracy {correct / ((len(x) - 1500) // batch * batch):.3f}")


if __name__ == "__main__":
    main()
