"""The seed's KVStore loop: devices push gradients, the store sums them and runs the updater,
devices pull the new weight.

    python examples/kvstore_updater.py
"""

import numpy as np
from mxkit import mx


def main():
    devices = [mx.cpu(0), mx.cpu(1)]
    shape = (2, 3)
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.ones(shape))

    def update(key, grad, weight):           # runs where the store keeps key 3
        weight[:] -= 0.1 * grad

    kv.set_updater(update)
    weights = [mx.nd.zeros(shape, ctx=d) for d in devices]
    for step in range(3):
        grads = [mx.nd.ones(shape, ctx=d) * (i + 1) for i, d in enumerate(devices)]   # each device's gradient
        kv.push(3, grads)                    # summed over devices: 1 + 2 = 3
        kv.pull(3, out=weights)              # every device gets the updated weight
        print(f"step {step + 1}: weight on {devices[1]} = {weights[1].asnumpy()[0]}")
    expected = 1 - 3 * 0.1 * 3
    assert np.allclose(weights[0].asnumpy(), expected) and np.allclose(weights[1].asnumpy(), expected)


if __name__ == "__main__":
    main()
