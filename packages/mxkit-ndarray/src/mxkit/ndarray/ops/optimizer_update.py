"""Fused optimizer update operators (MXNet's ``sgd_update``, ``adam_update``...).

Each update is one operator of the shared registry, so that it is pushed to the engine
as one operation that reads the gradient, writes the weight and its states in place, and
runs on whichever backend holds the arrays (the kernels are written against ``xp``, so
one serves numpy and CuPy). The states are declared as auxiliary inputs: the engine
orders them as writes, exactly like BatchNorm's moving statistics.

The arithmetic follows MXNet 1.x's kernels (``src/operator/optimizer_op-inl.h``) term by
term, including where weight decay enters and that clipping applies to
``rescale_grad * grad`` (SGD, NAG, Signum, FTRL) or to ``rescale_grad * grad + wd * weight``
(Adam, RMSProp). ``clip_gradient < 0`` means no clipping, as in MXNet. ``_adagrad_update``
and ``_adadelta_update`` fuse what MXNet 1.x did with several NDArray calls in Python.

Calling one imperatively: ``mx.nd.sgd_mom_update(w, g, mom, lr=0.1, momentum=0.9, out=w)``.
mxkit-train's optimizers call them through the registry; the CPU plugin overrides the
hottest ones (SGD, SGD with momentum, Adam) with one-pass loops.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import ShapeError
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_COMMON = [
    Param("lr", "float", doc="Learning rate."),
    Param("wd", "float", 0.0, doc="Weight decay (L2 penalty) coefficient."),
    Param("rescale_grad", "float", 1.0, doc="Multiplier of the gradient."),
    Param("clip_gradient", "float", -1.0, doc="Clip the rescaled gradient to [-c, c]; negative: no clipping."),
]
_LAZY = Param("lazy_update", "bool", True, doc="Accepted for MXNet compatibility (dense arrays only).")


def _same_shapes(name: str):
    def infer(params: dict, in_shapes: list) -> list:
        weight = tuple(in_shapes[0])
        for index, shape in enumerate(in_shapes[1:], start=1):
            if tuple(shape) != weight:
                raise ShapeError(f"{name}: input {index} has shape {tuple(shape)}, the weight has shape {weight}; "
                                 f"gradients and states must be shaped like the weight")
        return [weight]

    return infer


def _clip(xp: Any, values: Any, bound: float) -> Any:
    if bound >= 0:
        xp.clip(values, -bound, bound, out=values)
    return values


def _rescaled(xp: Any, grad: Any, params: dict) -> Any:
    """``clip(rescale_grad * grad, clip_gradient)`` in a fresh array."""
    return _clip(xp, grad * params["rescale_grad"], params["clip_gradient"])


def _rescaled_with_wd(xp: Any, weight: Any, grad: Any, params: dict) -> Any:
    """``clip(rescale_grad * grad + wd * weight, clip_gradient)`` (Adam, RMSProp)."""
    values = grad * params["rescale_grad"]
    if params["wd"]:
        values += weight * params["wd"]
    return _clip(xp, values, params["clip_gradient"])


def _sign(xp: Any, values: Any) -> Any:
    return xp.sign(values)


def _scaled_step(xp: Any, grad: Any, params: dict) -> Any:
    """``lr * clip(rescale_grad * grad, clip_gradient)`` in a fresh array (one pass without clipping)."""
    if params["clip_gradient"] < 0:
        return grad * (params["lr"] * params["rescale_grad"])
    step = _rescaled(xp, grad, params)
    step *= params["lr"]
    return step


def _sgd_update(xp, inputs, outputs, params):
    weight, grad = inputs
    step = _scaled_step(xp, grad, params)
    # (1 - lr*wd) * w - lr * g, written as one pass over the output
    xp.multiply(weight, 1.0 - params["lr"] * params["wd"], out=outputs[0])
    outputs[0] -= step


def _sgd_mom_update(xp, inputs, outputs, params):
    weight, grad, mom = inputs
    step = _scaled_step(xp, grad, params)
    if params["wd"]:
        step += weight * (params["lr"] * params["wd"])
    mom *= params["momentum"]
    mom -= step
    xp.add(weight, mom, out=outputs[0])


def _nag_mom_update(xp, inputs, outputs, params):
    weight, grad, mom = inputs
    lr, momentum, wd = params["lr"], params["momentum"], params["wd"]
    step = _rescaled(xp, grad, params)
    decayed = step + weight * wd if wd else step.copy()
    decayed *= lr
    # w + momentum * (momentum * mom - lr * g') - lr * g'
    ahead = mom * momentum
    ahead -= decayed
    ahead *= momentum
    ahead -= decayed
    xp.add(weight, ahead, out=outputs[0])
    # MXNet 1.9.1 writes the weight first and then reads it for the momentum's weight
    # decay term, so with out=weight (how the optimizer calls it) the term uses the
    # updated weight; reading `weight` after the write above reproduces that exactly
    if wd:
        step += weight * wd
    step *= lr
    mom *= momentum
    mom -= step


def _adam_update(xp, inputs, outputs, params):
    weight, grad, mean, var = inputs
    step = _rescaled_with_wd(xp, weight, grad, params)
    beta1, beta2 = params["beta1"], params["beta2"]
    mean *= beta1
    mean += step * (1.0 - beta1)
    var *= beta2
    step *= step
    step *= 1.0 - beta2
    var += step
    denom = xp.sqrt(var)
    denom += params["epsilon"]
    xp.divide(mean, denom, out=denom)
    denom *= params["lr"]
    xp.subtract(weight, denom, out=outputs[0])


def _clip_weights(xp: Any, out: Any, params: dict) -> None:
    if params["clip_weights"] >= 0:
        xp.clip(out, -params["clip_weights"], params["clip_weights"], out=out)


def _rmsprop_update(xp, inputs, outputs, params):
    weight, grad, n = inputs
    step = _rescaled_with_wd(xp, weight, grad, params)
    gamma1 = params["gamma1"]
    n *= gamma1
    n += (step * step) * (1.0 - gamma1)
    denom = n + params["epsilon"]
    xp.sqrt(denom, out=denom)
    step /= denom
    step *= params["lr"]
    xp.subtract(weight, step, out=outputs[0])
    _clip_weights(xp, outputs[0], params)


def _rmspropalex_update(xp, inputs, outputs, params):
    weight, grad, n, g, delta = inputs
    step = _rescaled_with_wd(xp, weight, grad, params)
    gamma1 = params["gamma1"]
    n *= gamma1
    n += (step * step) * (1.0 - gamma1)
    g *= gamma1
    g += step * (1.0 - gamma1)
    denom = n - g * g
    denom += params["epsilon"]
    xp.sqrt(denom, out=denom)
    step /= denom
    step *= params["lr"]
    delta *= params["gamma2"]
    delta -= step
    xp.add(weight, delta, out=outputs[0])
    _clip_weights(xp, outputs[0], params)


def _signsgd_update(xp, inputs, outputs, params):
    weight, grad = inputs
    # the sign of the gradient does not change under rescaling or clipping
    step = _sign(xp, grad)
    step *= params["lr"]
    xp.multiply(weight, 1.0 - params["lr"] * params["wd"], out=outputs[0])
    outputs[0] -= step


def _signum_update(xp, inputs, outputs, params):
    weight, grad, mom = inputs
    momentum = params["momentum"]
    step = _rescaled(xp, grad, params)
    if params["wd"]:
        step += weight * params["wd"]
    mom *= momentum
    step *= 1.0 - momentum
    mom -= step
    direction = _sign(xp, mom)
    direction *= params["lr"]
    xp.multiply(weight, 1.0 - params["lr"] * params["wd_lh"], out=outputs[0])
    outputs[0] += direction


def _ftrl_update(xp, inputs, outputs, params):
    weight, grad, z, n = inputs
    lr = params["lr"]
    step = _rescaled(xp, grad, params)
    squared = step * step
    sqrt_n = xp.sqrt(n)
    n += squared
    new_sqrt_n = xp.sqrt(n)
    # z += g - (sqrt(n + g^2) - sqrt(n)) * w / lr
    z += step
    z -= (new_sqrt_n - sqrt_n) * weight / lr
    denom = (new_sqrt_n + params["beta"]) / lr
    denom += params["wd"]
    lamda1 = params["lamda1"]
    value = xp.sign(z) * lamda1 - z
    value /= denom
    value *= xp.abs(z) > lamda1
    xp.copyto(outputs[0], value, casting="unsafe")


def _adagrad_update(xp, inputs, outputs, params):
    weight, grad, history = inputs
    step = _rescaled(xp, grad, params)
    history += step * step
    denom = history + params["epsilon"]
    xp.sqrt(denom, out=denom)
    step /= denom
    if params["wd"]:
        step += weight * params["wd"]
    step *= params["lr"]
    xp.subtract(weight, step, out=outputs[0])


def _adadelta_update(xp, inputs, outputs, params):
    weight, grad, acc_grad, acc_delta = inputs
    rho, eps = params["rho"], params["epsilon"]
    step = _rescaled(xp, grad, params)
    acc_grad *= rho
    acc_grad += (step * step) * (1.0 - rho)
    ratio = xp.sqrt(acc_delta + eps)
    ratio /= xp.sqrt(acc_grad + eps)
    step *= ratio
    acc_delta *= rho
    acc_delta += (step * step) * (1.0 - rho)
    # MXNet applies weight decay here without the learning rate
    if params["wd"]:
        step += weight * params["wd"]
    xp.subtract(weight, step, out=outputs[0])


_FLOAT = "float"
_SPECS: list[tuple[str, Any, tuple[str, ...], list[Param], str]] = [
    ("sgd_update", _sgd_update, (), [_LAZY],
     "SGD without momentum: w = (1 - lr*wd)*w - lr*clip(rescale_grad*g)."),
    ("sgd_mom_update", _sgd_mom_update, ("mom",), [Param("momentum", _FLOAT, 0.0), _LAZY],
     "SGD with momentum: mom = momentum*mom - lr*wd*w - lr*clip(rescale_grad*g); w += mom."),
    ("nag_mom_update", _nag_mom_update, ("mom",), [Param("momentum", _FLOAT, 0.0)],
     "Nesterov momentum (MXNet 1.9.1): g' = clip(rescale_grad*g) + wd*w; "
     "w += momentum*(momentum*mom - lr*g') - lr*g'; mom = momentum*mom - lr*g'."),
    ("adam_update", _adam_update, ("mean", "var"),
     [Param("beta1", _FLOAT, 0.9), Param("beta2", _FLOAT, 0.999), Param("epsilon", _FLOAT, 1e-8), _LAZY],
     "Adam: g' = clip(rescale_grad*g + wd*w); m, v moving moments; w -= lr*m/(sqrt(v)+epsilon)."),
    ("rmsprop_update", _rmsprop_update, ("n",),
     [Param("gamma1", _FLOAT, 0.95), Param("epsilon", _FLOAT, 1e-8), Param("clip_weights", _FLOAT, -1.0)],
     "RMSProp (Tieleman and Hinton): n = gamma1*n + (1-gamma1)*g'^2; w -= lr*g'/sqrt(n+epsilon)."),
    ("rmspropalex_update", _rmspropalex_update, ("n", "g", "delta"),
     [Param("gamma1", _FLOAT, 0.95), Param("gamma2", _FLOAT, 0.9), Param("epsilon", _FLOAT, 1e-8),
      Param("clip_weights", _FLOAT, -1.0)],
     "Centered RMSProp (Graves 2013, eq. 38-45)."),
    ("signsgd_update", _signsgd_update, (), [],
     "signSGD: w = (1 - lr*wd)*w - lr*sign(g)."),
    ("signum_update", _signum_update, ("mom",), [Param("momentum", _FLOAT, 0.0), Param("wd_lh", _FLOAT, 0.0)],
     "Signum: mom = momentum*mom - (1-momentum)*(clip(rescale_grad*g) + wd*w); "
     "w = (1 - lr*wd_lh)*w + lr*sign(mom)."),
    ("ftrl_update", _ftrl_update, ("z", "n"), [Param("lamda1", _FLOAT, 0.01), Param("beta", _FLOAT, 1.0)],
     "FTRL-proximal (McMahan et al. 2013)."),
    ("_adagrad_update", _adagrad_update, ("history",), [Param("epsilon", _FLOAT, 1e-7)],
     "AdaGrad: history += g'^2; w -= lr*(g'/sqrt(history+epsilon) + wd*w)."),
    ("_adadelta_update", _adadelta_update, ("acc_grad", "acc_delta"),
     [Param("rho", _FLOAT, 0.9), Param("epsilon", _FLOAT, 1e-5)],
     "AdaDelta (Zeiler 2012), with MXNet's weight decay w -= delta + wd*w."),
]


def define_update_ops(specs: list[tuple[str, Any, tuple[str, ...], list[Param], str]]) -> dict[str, OpDef]:
    """Define update operators ``(name, kernel, state names, extra parameters, doc)``:
    inputs ``weight, grad``, the states as auxiliary (written) inputs, the common
    parameters (``lr``, ``wd``, ``rescale_grad``, ``clip_gradient``) plus the extra ones."""
    ops = {}
    for name, kernel, states, extra, doc in specs:
        op = OpDef(name=name, kernel=kernel, infer_shape=_same_shapes(name), num_inputs=2,
                   input_names=("weight", "grad"), aux_names=states, params=schema([*_COMMON, *extra]),
                   doc=doc)
        ops[name] = define(op)
    UPDATE_OPS.update(ops)
    return ops


#: every update operator by name (this module's and :mod:`.optimizer_update_extra`'s)
UPDATE_OPS: dict[str, OpDef] = {}
define_update_ops(_SPECS)


def default_params(name: str) -> dict[str, Any]:
    """The typed defaults of update operator ``name`` (every optional parameter)."""
    return {p.name: p.default for p in UPDATE_OPS[name].params if not p.required}


__all__ = ["UPDATE_OPS", "default_params", "define_update_ops"]
