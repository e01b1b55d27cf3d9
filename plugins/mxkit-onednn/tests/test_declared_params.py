"""Every oneDNN kernel declares the operator parameters it implements; a call with anything else goes to the
replaced kernel. For every overridden operator, each parameter of its definition that the kernel does not
declare (or a value outside the declared ones) is set on a call oneDNN otherwise serves: the result must be
mxkit-cpu's, bit for bit, and no oneDNN program may have run. A kernel that ignored such a parameter would
either build a program or (for a parameter that changes the result) give another result."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import get_registry
from mxkit_onednn import kernels
from mxkit_onednn.kernels import ANY, handles, operator_defaults, unhandled_params, with_fallback
from onednn_harness import assert_within, needs_onednn, run, sum_bound

pytestmark = needs_onednn


def _rand(*shape, positive=False):
    rng = np.random.default_rng(sum(shape) + len(shape))
    values = rng.standard_normal(shape).astype(np.float32)
    return np.abs(values) + np.float32(0.5) if positive else values


def _out_shape(name: str, params: dict, in_shapes: list) -> tuple:
    op = get_registry().get(name)
    return tuple(op.infer_shape(op.parse_params(params), in_shapes)[0])


def _conv(params):
    return [_rand(2, 3, 6, 6), _rand(4, 3, 3, 3), _rand(4)][:2 if params.get("no_bias") else 3]


def _conv_backward(params):
    x, w = _rand(2, 3, 6, 6), _rand(4, 3, 3, 3)
    return [_rand(*_out_shape("Convolution", params, [x.shape, w.shape, (4,)])), x, w]


def _fused_conv(params):
    inputs = _conv(params)
    if params.get("with_sum"):
        conv_params = {k: v for k, v in params.items() if k not in ("act_type", "with_sum")}
        inputs.append(_rand(*_out_shape("Convolution", conv_params, [x.shape for x in inputs])))
    return inputs


def _deconv(params):
    return [_rand(2, 4, 3, 3), _rand(4, 2, 3, 3), _rand(2)][:2 if params.get("no_bias", True) else 3]


def _deconv_backward(params):
    x, w = _rand(2, 4, 3, 3), _rand(4, 2, 3, 3)
    return [_rand(*_out_shape("Deconvolution", params, [x.shape, w.shape, (2,)])), x, w]


def _pool_backward(params):
    x = _rand(2, 3, 6, 6)
    y = run("Pooling", [x], "cpu", **params)[0]
    return [_rand(*y.shape), x, y]


def _batchnorm(params):
    return [_rand(2, 3, 3, 3), _rand(3), _rand(3), _rand(3), _rand(3, positive=True)]


def _softmax(params):
    return [_rand(3, 5)] + ([np.array([1, 4, 5], np.float32)] if params.get("use_length") else [])


def _softmax_backward(name):
    def make(params):
        inputs = _softmax(params)
        forward = {k: v for k, v in params.items() if k != "dtype"}
        y = run(name, inputs, "cpu", **forward)[0]
        return [_rand(*y.shape), y, *inputs[1:]]
    return make


#: a call oneDNN serves, per overridden operator: (parameters, inputs as a function of the parameters)
CASES = {
    "Convolution": (dict(kernel=(3, 3), num_filter=4), _conv),
    "_backward_Convolution": (dict(kernel=(3, 3), num_filter=4), _conv_backward),
    "_FusedConvolution": (dict(kernel=(3, 3), num_filter=4, act_type="relu"), _fused_conv),
    "Deconvolution": (dict(kernel=(3, 3), num_filter=2, stride=(2, 2), pad=(1, 1)), _deconv),
    "_backward_Deconvolution": (dict(kernel=(3, 3), num_filter=2, stride=(2, 2), pad=(1, 1)), _deconv_backward),
    "LRN": (dict(nsize=3), lambda p: [_rand(2, 6, 3, 3)]),
    "_backward_LRN": (dict(nsize=3), lambda p: [_rand(2, 6, 3, 3), _rand(2, 6, 3, 3)]),
    "Pooling": (dict(kernel=(2, 2), stride=(2, 2), pool_type="max"), lambda p: [_rand(2, 3, 6, 6)]),
    "_backward_Pooling": (dict(kernel=(2, 2), stride=(2, 2), pool_type="max"), _pool_backward),
    "BatchNorm": (dict(fix_gamma=False), _batchnorm),
    # out_grad, data, gamma, moving_mean, moving_var
    "_backward_BatchNorm": (dict(fix_gamma=False), lambda p: [_rand(2, 3, 3, 3), *_batchnorm(p)[:2],
                                                              *_batchnorm(p)[3:]]),
    "FullyConnected": (dict(num_hidden=4), lambda p: [_rand(3, 5), _rand(4, 5), _rand(4)][:2 if p.get("no_bias")
                                                                                              else 3]),
    "_backward_FullyConnected": (dict(num_hidden=4), lambda p: [_rand(3, 4), _rand(3, 5), _rand(4, 5)]),
    "Activation": (dict(act_type="relu"), lambda p: [_rand(3, 5)]),
    "_backward_relu": ({}, lambda p: [_rand(3, 5), np.abs(_rand(3, 5))]),
    "_backward_sigmoid": ({}, lambda p: [_rand(3, 5), np.abs(_rand(3, 5)) / 4]),
    "_backward_tanh": ({}, lambda p: [_rand(3, 5), _rand(3, 5) / 4]),
    "add_n": (dict(num_args=2), lambda p: [_rand(3, 5), _rand(3, 5)]),
    "Concat": (dict(num_args=2), lambda p: [_rand(3, 5, 2), _rand(3, 5, 2)]),
    "softmax": ({}, _softmax),
    "log_softmax": ({}, _softmax),
    "_backward_softmax": ({}, _softmax_backward("softmax")),
    "_backward_log_softmax": ({}, _softmax_backward("log_softmax")),
}

#: parameters some of whose values oneDNN does not implement, but with no such value valid on these inputs
#: (mxkit accepts only channel-first layouts, each of one dimensionality)
NO_VALID_VALUE = {("Convolution", "layout"), ("_backward_Convolution", "layout"), ("_FusedConvolution", "layout"),
                  ("Pooling", "layout"),
                  ("_backward_Pooling", "layout"), ("Deconvolution", "layout"), ("_backward_Deconvolution", "layout")}

#: values to try where a parameter's kind alone does not suggest one
EXTRA_VALUES = {("Pooling", "pool_type", "lp"): dict(p_value=2), ("_backward_Pooling", "pool_type", "lp"):
                dict(p_value=2)}


def _kernel(name):
    return get_registry().get(name).kernel_for("numpy")


def _declared(name) -> dict:
    return _kernel(name).handles


def _candidate_values(param) -> list:
    """Values of ``param`` other than its default, valid for its kind."""
    default = None if param.required else param.default
    if param.choices is not None:
        return [c for c in param.choices if c != default]
    return {"bool": [not default], "float": [2.0, 0.5, 0.25], "int": [2, 3, 0],
            "dtype": ["float64", "float16", "float32"]}.get(param.kind, [])


def test_every_overridden_operator_has_a_case_and_declares_only_its_own_parameters():
    assert set(CASES) == set(kernels.OVERRIDES)
    for name in kernels.OVERRIDES:
        own = {param.name for param in get_registry().get(name).params}
        assert set(_declared(name)) <= own, (name, set(_declared(name)) - own)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_parameter_the_kernel_does_not_declare_goes_to_mxkit_cpu(onednn_only, name):
    from mxkit_onednn.program import PROGRAMS

    base, make_inputs = CASES[name]
    # the base call is oneDNN's: an empty program cache below does mean that oneDNN stood aside
    PROGRAMS.clear()
    PROGRAMS.only = "blocked16" if name == "_backward_LRN" else "plain"  # LRN's gradient has no plain program
    run(name, make_inputs(base), **base)
    assert len(PROGRAMS) == 1 and "fallback" not in PROGRAMS.chosen().values(), (name, PROGRAMS.refusals)

    declared = _declared(name)
    untested = []
    for param in get_registry().get(name).params:
        rule = declared.get(param.name)
        if rule is ANY or param.name in base:
            continue  # claimed: see the next test
        exercised = False
        for value in _candidate_values(param):
            params = {**base, param.name: value, **EXTRA_VALUES.get((name, param.name, value), {})}
            if rule is not None and kernels.accepts(rule, get_registry().get(name).parse_params(params)[param.name]):
                continue  # a value the kernel does implement
            try:
                inputs = make_inputs(params)
                want = run(name, [x.copy() for x in inputs], "cpu", **params)
            except (MXKitError, ValueError):
                continue  # not a valid call of the operator
            PROGRAMS.clear()
            got = run(name, [x.copy() for x in inputs], **params)
            assert len(PROGRAMS) == 0, f"{name}: {param.name}={value!r} ran a oneDNN program"
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=f"{name}: {param.name}={value!r}")
            exercised = True
        if not exercised:
            untested.append(param.name)
    assert {(name, p) for p in untested} <= NO_VALID_VALUE, untested


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_parameter_the_kernel_declares_for_every_value_changes_its_result_as_it_does_mxkit_cpus(onednn_only, name):
    """The other side: a kernel claiming a parameter it ignored would give mxkit-cpu's result at the default
    and another one here. Each result is a float32 sum of at most 64 terms (27 products of a 3x3x3 window and a
    bias, 32 values per channel of BatchNorm...), each at most 16 times the largest output or 1 (standard normal
    inputs, variances at least 0.5): the bound of such sums, far below the change a parameter makes."""
    base, make_inputs = CASES[name]
    for param in get_registry().get(name).params:
        if _declared(name).get(param.name) is not ANY or param.name in base:
            continue
        for value in _candidate_values(param):
            params = {**base, param.name: value}
            try:
                inputs = make_inputs(params)
                want = run(name, [x.copy() for x in inputs], "cpu", **params)
            except (MXKitError, ValueError):
                continue  # not a valid call of the operator
            got = run(name, [x.copy() for x in inputs], **params)
            for g, w in zip(got, want):
                scale = 16 * (float(np.nanmax(np.abs(w), initial=0)) + 1)
                assert_within(g, w, sum_bound(64, np.full(w.shape, scale)), f"{name}: {param.name}={value!r}")


def test_unhandled_params_names_what_a_declaration_leaves_out():
    defaults = dict(a=1, b=False, c=None)
    declared = dict(a=ANY, c=(None, 1.0))
    assert unhandled_params(declared, dict(a=7, b=False, c=1.0, _req=["null"]), defaults) == []
    assert unhandled_params(declared, dict(a=7, b=True, c=2.0), defaults) == ["b", "c"]
    assert unhandled_params(declared, dict(d=3), defaults) == ["d"]  # no default known: not implemented
    assert unhandled_params(dict(c=lambda v: v is None or v > 0), dict(c=-1.0), defaults) == ["c"]
    assert unhandled_params(dict(b=(False,)), dict(b=0), defaults) == ["b"]  # 0 is not False


def test_a_kernel_that_declares_nothing_never_sees_a_non_default_parameter():
    calls = []

    @handles()
    def onednn_kernel(inputs, outputs, params, replaced):
        calls.append("onednn")

    op = get_registry().get("softmax")
    serve = with_fallback(onednn_kernel, lambda xp, i, o, p: calls.append("fallback"), operator_defaults(op))
    serve(np, [], [], op.parse_params({}))
    serve(np, [], [], op.parse_params(dict(axis=0)))
    assert calls == ["onednn", "fallback"]
