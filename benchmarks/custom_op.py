"""The cost of a Python custom operator (``mx.operator``): mxkit next to MXNet 1.9.1.

Rows (the same code runs on both frameworks):

- **imperative call**: ``mx.nd.Custom`` of an operator whose forward copies its input through
  numpy (``asnumpy()`` then ``assign``, the usual pattern), on a (64, 64) array, waited for;
  the built-in ``mx.nd.relu`` on the same array shows the floor of one operator call;
- **executor step**: forward + backward of a 784-128-10 MLP (batch 128) ending in the MXNet
  docs' custom softmax (need_top_grad=False), and the same MLP ending in the built-in
  ``SoftmaxOutput``.

Printed: microseconds per call/step (best of ``--repeats`` blocks), and mxkit's time over
MXNet's. MXNet runs in a subprocess of the interpreter named by ``MXKIT_BENCH_MXNET_PYTHON``
(or ``--mxnet-python``); without one its column is empty. Nothing here asserts on time.

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python python benchmarks/custom_op.py
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import best_seconds_per_step, run_anchor


def measure(framework: str, steps: int, repeats: int) -> dict[str, float]:
    """Seconds per call of each row under ``framework`` ('mxkit' or 'mxnet')."""
    if framework == "mxnet":
        import mxnet as mx
    else:
        from mxkit import mx

    class Copy(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], mx.nd.array(in_data[0].asnumpy()))

    @mx.operator.register("bench_copy")
    class CopyProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return Copy()

    class Softmax(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            x = in_data[0].asnumpy()
            y = np.exp(x - x.max(axis=1, keepdims=True))
            self.assign(out_data[0], req[0], mx.nd.array(y / y.sum(axis=1, keepdims=True)))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            label = in_data[1].asnumpy().astype(np.int64)
            y = out_data[0].asnumpy()
            y[np.arange(label.shape[0]), label] -= 1.0
            self.assign(in_grad[0], req[0], mx.nd.array(y))

    @mx.operator.register("bench_softmax")
    class SoftmaxProp(mx.operator.CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=False)

        def list_arguments(self):
            return ["data", "label"]

        def infer_shape(self, in_shape):
            return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return Softmax()

    def best(step) -> float:
        return best_seconds_per_step(step, lambda: None, steps, repeats, warmup=3)  # each step waits itself

    x = mx.nd.array(np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32))
    rows = {"imperative call: Custom (numpy copy)": best(lambda: mx.nd.Custom(x, op_type="bench_copy").wait_to_read()),
            "imperative call: built-in relu": best(lambda: mx.nd.relu(x).wait_to_read())}

    rng = np.random.default_rng(1)
    data, label = rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128).astype(np.float32)
    for title, head in (("executor step: MLP + custom softmax", "custom"),
                        ("executor step: MLP + SoftmaxOutput", "builtin")):
        net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=128, name="fc1")
        net = mx.sym.FullyConnected(mx.sym.Activation(net, act_type="relu"), num_hidden=10, name="fc2")
        if head == "custom":
            net = mx.sym.Custom(net, mx.sym.Variable("softmax_label"), op_type="bench_softmax", name="softmax")
        else:
            net = mx.sym.SoftmaxOutput(net, mx.sym.Variable("softmax_label"), name="softmax")
        reqs = {n: "null" if n in ("data", "softmax_label") else "write" for n in net.list_arguments()}
        exe = net.simple_bind(mx.cpu(), grad_req=reqs, data=data.shape, softmax_label=label.shape)
        for name, array in exe.arg_dict.items():
            array[:] = data if name == "data" else label if name == "softmax_label" else \
                rng.uniform(-0.1, 0.1, array.shape).astype(np.float32)

        def step(exe=exe):
            exe.forward(is_train=True)
            exe.backward()
            exe.grad_dict["fc1_weight"].wait_to_read()

        rows[title] = best(step)
    return rows


_MXNET_SCRIPT = """
import json, sys
sys.path.insert(0, {folder!r})
import custom_op
steps, repeats = json.loads(sys.argv[1])
print("RESULT " + json.dumps(custom_op.measure("mxnet", steps, repeats)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mxnet-python", default=os.environ.get("MXKIT_BENCH_MXNET_PYTHON"))
    args = parser.parse_args()
    ours = measure("mxkit", args.steps, args.repeats)
    folder = os.path.dirname(os.path.abspath(__file__))
    theirs = run_anchor(args.mxnet_python, _MXNET_SCRIPT.format(folder=folder), [args.steps, args.repeats])
    print(f"{'row':40} {'mxkit us':>10} {'MXNet 1.9.1 us':>15} {'mxkit / MXNet':>14}")
    for title, seconds in ours.items():
        other = theirs.get(title)
        other_text = f"{other * 1e6:15.1f}" if other else f"{'-':>15}"
        ratio = f"{seconds / other:14.2f}" if other else f"{'-':>14}"
        print(f"{title:40} {seconds * 1e6:10.1f} {other_text} {ratio}")


if __name__ == "__main__":
    main()
