"""Custom operators in the profiler's aggregate, as MXNet shows them: the "Custom Operator"
domain holds ``<op_type>::pure_python`` (the Python method) and ``<op_type>::<op>`` for every
operation pushed inside it."""

import json

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit.engine import profiler
from mxkit.ndarray import autograd, operator


class _Sigmoid(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        self.assign(out_data[0], req[0], nd.array(1.0 / (1.0 + np.exp(-x))))
        nd.zeros((4, 4)).wait_to_read()  # pushed inside the operator: named after it

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        y, dy = out_data[0].asnumpy(), out_grad[0].asnumpy()
        self.assign(in_grad[0], req[0], nd.array(dy * (1.0 - y) * y))


@operator.register("ProfiledSigmoid")
class _SigmoidProp(operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shapes):
        return (in_shapes[0],), (in_shapes[0],), ()

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Sigmoid()


@pytest.fixture
def recording(tmp_path):
    profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(tmp_path / "profile.json"))
    profiler.set_state("run")
    profiler.dumps(reset=True)
    yield
    profiler.reset()


def test_custom_operator_domain_in_the_aggregate(recording):
    x = nd.array([0.0, 1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = nd.Custom(x, op_type="ProfiledSigmoid")
    y.backward()
    nd.waitall()
    stats = json.loads(profiler.dumps(format="json"))["Time"]
    custom = stats[profiler.CUSTOM_OPERATOR_DOMAIN]
    for name in ("ProfiledSigmoid::pure_python", "_backward_ProfiledSigmoid::pure_python",
                 "ProfiledSigmoid::_zeros"):
        assert custom[name]["Count"] == 1, name
    assert not any(name.startswith("ProfiledSigmoid::") for name in stats["operator"])
    sigmoid = 1.0 / (1.0 + np.exp(-x.asnumpy()))
    np.testing.assert_allclose(x.grad.asnumpy(), sigmoid * (1 - sigmoid), rtol=1e-6)
