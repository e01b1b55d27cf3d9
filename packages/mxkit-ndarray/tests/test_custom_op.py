"""mx.operator custom operators, imperatively: keyword arguments as strings, assign's requests,
one operator instance per call shared by forward and backward, nesting, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import MXKitError
from mxkit.ndarray import autograd
from mxkit.ndarray import operator as op_api
from mxkit.ndarray.creation import array, ones, zeros
from mxkit.ndarray.invoke import invoke_by_name
from mxkit.ndarray.registry import UnknownOperatorError

SEEN_KWARGS: list[dict] = []


class Scale(op_api.CustomOp):
    def __init__(self, factor):
        self.factor = factor
        self.saved = None

    def forward(self, is_train, req, in_data, out_data, aux):
        self.saved = in_data[0].asnumpy().copy()  # state kept for backward, as MXNet users do
        self.assign(out_data[0], req[0], in_data[0] * self.factor)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        # reads the state forward kept: the same instance must serve both
        np.testing.assert_array_equal(self.saved, in_data[0].asnumpy())
        self.assign(in_grad[0], req[0], out_grad[0] * self.factor)


@op_api.register("test_scale")
class ScaleProp(op_api.CustomOpProp):
    def __init__(self, factor="1", **extra):
        super().__init__(need_top_grad=True)
        SEEN_KWARGS.append({"factor": factor, **extra})
        self.factor = float(factor)

    def create_operator(self, ctx, shapes, dtypes):
        return Scale(self.factor)


def custom(*inputs, **kwargs):
    return invoke_by_name("Custom", *inputs, **kwargs)


def test_forward_backward_and_kwargs_arrive_as_strings():
    x = array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.attach_grad()
    with autograd.record():
        y = custom(x, op_type="test_scale", factor=3, flag=True)
    y.backward(ones((2, 3)) * 2)
    np.testing.assert_allclose(y.asnumpy(), np.arange(6).reshape(2, 3) * 3)
    np.testing.assert_allclose(x.grad.asnumpy(), np.full((2, 3), 6.0))
    assert {"factor": "3", "flag": "True"} in SEEN_KWARGS


def test_each_call_gets_its_own_operator_instance():
    a, b = array(np.ones((2, 2))), array(np.full((2, 2), 5.0))
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        ya = custom(a, op_type="test_scale", factor=2)
        yb = custom(b, op_type="test_scale", factor=2)  # a second forward before the first backward
    autograd.backward([ya, yb])  # each backward checks its own saved input
    np.testing.assert_allclose(a.grad.asnumpy(), np.full((2, 2), 2.0))
    np.testing.assert_allclose(b.grad.asnumpy(), np.full((2, 2), 2.0))


def test_assign_honours_the_request():
    operator = op_api.CustomOp()
    dst = array(np.ones(3))
    operator.assign(dst, "null", array(np.full(3, 7.0)))
    np.testing.assert_allclose(dst.asnumpy(), 1)
    operator.assign(dst, "add", array(np.full(3, 2.0)))
    np.testing.assert_allclose(dst.asnumpy(), 3)
    operator.assign(dst, "add", np.full(3, 1.0))
    np.testing.assert_allclose(dst.asnumpy(), 4)
    operator.assign(dst, "inplace", array(np.full(3, 5.0)))
    np.testing.assert_allclose(dst.asnumpy(), 5)
    operator.assign(dst, "write", np.zeros(3))
    np.testing.assert_allclose(dst.asnumpy(), 0)
    with pytest.raises(op_api.CustomOpError, match="unknown req 'overwrite'"):
        operator.assign(dst, "overwrite", np.zeros(3))


@op_api.register("test_nested")
class NestedProp(op_api.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        class Nested(op_api.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                inner = custom(in_data[0], op_type="test_scale", factor=10)  # a custom op inside one
                self.assign(out_data[0], req[0], inner + 1)

        return Nested()


def test_a_custom_op_may_call_another():
    out = custom(array(np.ones((2, 2))), op_type="test_nested")
    np.testing.assert_allclose(out.asnumpy(), 11)


def test_default_property_shapes_and_names():
    prop = op_api.CustomOpProp()
    assert prop.list_arguments() == ["data"] and prop.list_outputs() == ["output"]
    assert prop.infer_shape([[2, 3]]) == ([[2, 3]], ([2, 3],), ())
    assert prop.declare_backward_dependency([0], [1], [2]) == [0, 1, 2]
    assert op_api.CustomOpProp(need_top_grad=False).declare_backward_dependency([0], [1], [2]) == [1, 2]
    assert "test_scale" in op_api.get_registered_custom_operators()


@op_api.register("test_bad_init")
class BadInitProp(op_api.CustomOpProp):
    def __init__(self):
        super().__init__()


@op_api.register("test_not_an_op")
class NotAnOpProp(op_api.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return "not an operator"


@op_api.register("test_failing_backward")
class FailingBackwardProp(op_api.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        class FailingBackward(op_api.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                self.assign(out_data[0], req[0], in_data[0])

            def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
                raise ValueError("no gradient today")

        return FailingBackward()


def test_errors_name_the_op_type():
    with pytest.raises(UnknownOperatorError, match=r"'missing_op' is not registered.*'test_scale'"):
        custom(ones((2,)), op_type="missing_op")
    with pytest.raises(op_api.CustomOpError, match=r"test_bad_init.*BadInitProp.*unexpected keyword"):
        custom(ones((2,)), op_type="test_bad_init", color="red")
    out = custom(ones((2,)), op_type="test_not_an_op")
    with pytest.raises(MXKitError, match=r"test_not_an_op.*expected a mx\.operator\.CustomOp"):
        out.asnumpy()
    x = ones((2,))
    x.attach_grad()
    with autograd.record():
        y = custom(x, op_type="test_failing_backward")
    y.backward()
    with pytest.raises(MXKitError, match="'test_failing_backward': backward raised ValueError: no gradient today"):
        x.grad.asnumpy()
    assert zeros((2,)).asnumpy().sum() == 0  # the engine goes on


@op_api.register("test_waitall_inside")
class WaitallInsideProp(op_api.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        class WaitallInside(op_api.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                from mxkit.ndarray.creation import waitall

                waitall()  # would wait for this very operation

        return WaitallInside()


def test_waitall_inside_a_custom_op_is_refused_not_deadlocked():
    out = custom(ones((2,)), op_type="test_waitall_inside")
    with pytest.raises(MXKitError, match=r"waitall\(\) inside custom operator 'test_waitall_inside'"):
        out.asnumpy()


def test_register_checks_what_it_decorates():
    with pytest.raises(op_api.CustomOpError, match="CustomOpProp subclass"):
        op_api.register("test_plain_class")(object)
    with pytest.raises(op_api.CustomOpError, match="non-empty name"):
        op_api.register("")
