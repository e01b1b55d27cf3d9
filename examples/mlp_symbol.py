"""The seed's MLP as a Symbol: declare, infer shapes, bind and run forward.

    python examples/mlp_symbol.py
"""

import numpy as np
from mxkit import mx


def mlp():
    net = mx.symbol.Variable("data")
    net = mx.symbol.FullyConnected(data=net, name="fc1", num_hidden=128)
    net = mx.symbol.Activation(data=net, name="relu1", act_type="relu")
    net = mx.symbol.FullyConnected(data=net, name="fc2", num_hidden=64)
    net = mx.symbol.Activation(data=net, name="relu2", act_type="relu")
    net = mx.symbol.FullyConnected(data=net, name="fc3", num_hidden=10)
    return mx.symbol.SoftmaxOutput(data=net, name="softmax")


def main():
    net = mlp()
    print("arguments:", net.list_arguments())
    arg_shapes, out_shapes, _ = net.infer_shape(data=(100, 784))
    print("shapes:", dict(zip(net.list_arguments(), arg_shapes)), "->", out_shapes)
    executor = net.simple_bind(ctx=mx.cpu(), data=(100, 784), grad_req="null")
    for name, array in executor.arg_dict.items():
        if name.endswith("weight"):
            array[:] = np.random.uniform(-0.07, 0.07, array.shape)
    executor.arg_dict["data"][:] = np.random.rand(100, 784)
    probabilities = executor.forward()[0].asnumpy()
    first = probabilities[0]
    print("class probabilities of the first sample:", np.round(first, 3), f"sum {first.sum():.4f}")


if __name__ == "__main__":
    main()
