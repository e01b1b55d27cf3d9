"""The seed's first snippet: an NDArray on a device, computed on the engine.

    python examples/ndarray_on_device.py            # on the GPU when the CUDA backend works, else the CPU
    python examples/ndarray_on_device.py --ctx cpu
"""

import argparse

from mxkit import mx


def pick_context(name):
    if name == "cpu":
        return mx.cpu()
    try:
        a = mx.nd.ones((1,), mx.gpu())
        a.wait_to_read()
        return mx.gpu()
    except mx.MXKitError:
        if name == "gpu":
            raise
        return mx.cpu()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ctx", choices=("auto", "cpu", "gpu"), default="auto")
    ctx = pick_context(parser.parse_args().ctx)

    a = mx.nd.ones((2, 3), ctx)
    b = a * 2 + 1                     # returns at once; the engine runs it
    print(ctx, b.asnumpy())           # asnumpy() waits for the result


if __name__ == "__main__":
    main()
