"""More of MXNet 1.x's optimizer updates as fused operators: Adamax, Nadam, FTML, DCASGD
(``mxkit.train.optimizer.extra``) and the layer-wise trust-ratio updates LAMB and LARS
(``mxkit.train.optimizer.layerwise``).

Adamax, Nadam and DCASGD were Python-level NDArray arithmetic in MXNet 1.x; here they are
fused operators like the others (same formulas, term by term). LAMB and LARS compute their
ratio of norms inside the kernel, on the device that holds the weight, so no norm travels
to the host between operations.
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.ops.optimizer_update import _clip, _sgd_mom_update, _sgd_update, define_update_ops
from mxkit.ndarray.params import Param


def _grad_with_wd(xp: Any, weight: Any, grad: Any, params: dict) -> Any:
    """``clip(rescale_grad * grad + wd * weight, clip_gradient)`` in a fresh array."""
    values = grad * params["rescale_grad"]
    if params["wd"]:
        values += weight * params["wd"]
    return _clip(xp, values, params["clip_gradient"])


def _adamax_update(xp, inputs, outputs, params):
    weight, grad, mean, norm = inputs
    step = _grad_with_wd(xp, weight, grad, params)
    beta1 = params["beta1"]
    mean *= beta1
    mean += step * (1.0 - beta1)
    norm *= params["beta2"]
    xp.maximum(norm, xp.abs(step), out=norm)
    # lr already divided by 1 - beta1^t
    xp.subtract(weight, mean * params["lr"] / norm, out=outputs[0])


def _nadam_update(xp, inputs, outputs, params):
    weight, grad, mean, var = inputs
    step = _grad_with_wd(xp, weight, grad, params)
    beta1, beta2 = params["beta1"], params["beta2"]
    mean *= beta1
    mean += step * (1.0 - beta1)
    var *= beta2
    var += (step * step) * (1.0 - beta2)
    momentum_t, momentum_next = params["momentum_t"], params["momentum_t_1"]
    m_bar = step * ((1.0 - momentum_t) / (1.0 - params["m_schedule"]))
    m_bar += mean * (momentum_next / (1.0 - params["m_schedule_next"]))
    denom = xp.sqrt(var / (1.0 - params["beta2_power"]))
    denom += params["epsilon"]
    m_bar /= denom
    m_bar *= params["lr"]
    xp.subtract(weight, m_bar, out=outputs[0])


def _ftml_update(xp, inputs, outputs, params):
    weight, grad, d, v, z = inputs
    if params.get("clip_grad", -1.0) >= 0:  # MXNet's FTMLParam calls it clip_grad
        params = dict(params, clip_gradient=params["clip_grad"])
    step = _grad_with_wd(xp, weight, grad, params)
    beta1, beta2, t = params["beta1"], params["beta2"], params["t"]
    v *= beta2
    v += (step * step) * (1.0 - beta2)
    d_t = xp.sqrt(v / (1.0 - beta2 ** t))
    d_t += params["epsilon"]
    d_t *= (1.0 - beta1 ** t) / params["lr"]
    z *= beta1
    z += step * (1.0 - beta1)
    z -= (d_t - d * beta1) * weight
    d[...] = d_t
    xp.divide(-z, d_t, out=outputs[0])


def _dcasgd_step(xp: Any, weight: Any, grad: Any, previous: Any, params: dict) -> Any:
    """``-lr * (g' + wd * w + lamda * g'^2 * (w - previous))``, with g' = clip(rescale_grad * g)."""
    scaled = _clip(xp, grad * params["rescale_grad"], params["clip_gradient"])
    step = scaled * scaled
    step *= params["lamda"]
    step *= weight - previous
    step += scaled
    if params["wd"]:
        step += weight * params["wd"]
    step *= -params["lr"]
    return step


def _dcasgd_update(xp, inputs, outputs, params):
    weight, grad, previous = inputs
    step = _dcasgd_step(xp, weight, grad, previous, params)
    previous[...] = weight
    xp.add(weight, step, out=outputs[0])


def _dcasgd_mom_update(xp, inputs, outputs, params):
    weight, grad, mom, previous = inputs
    step = _dcasgd_step(xp, weight, grad, previous, params)
    mom *= params["momentum"]
    mom += step
    previous[...] = weight
    xp.add(weight, mom, out=outputs[0])


_F = "float"
define_update_ops([
    ("_adamax_update", _adamax_update, ("mean", "norm"), [Param("beta1", _F, 0.9), Param("beta2", _F, 0.999)],
     "AdaMax: m = beta1*m + (1-beta1)*g'; u = max(beta2*u, |g'|); w -= lr*m/u (lr bias-corrected)."),
    ("_nadam_update", _nadam_update, ("mean", "var"),
     [Param("beta1", _F, 0.9), Param("beta2", _F, 0.999), Param("epsilon", _F, 1e-8), Param("momentum_t", _F),
      Param("momentum_t_1", _F), Param("m_schedule", _F), Param("m_schedule_next", _F), Param("beta2_power", _F)],
     "Nesterov Adam (Dozat 2015) with MXNet's momentum schedule."),
    ("ftml_update", _ftml_update, ("d", "v", "z"),
     [Param("beta1", _F, 0.6), Param("beta2", _F, 0.999), Param("epsilon", _F, 1e-8), Param("t", "int"),
      Param("clip_grad", _F, -1.0, doc="MXNet's name of clip_gradient for this operator (either may be given).")],
     "FTML (Zheng and Kwok 2017)."),
    ("_dcasgd_update", _dcasgd_update, ("previous_weight",), [Param("lamda", _F, 0.04)],
     "Delay-compensated SGD without momentum."),
    ("_dcasgd_mom_update", _dcasgd_mom_update, ("mom", "previous_weight"),
     [Param("lamda", _F, 0.04), Param("momentum", _F, 0.0)], "Delay-compensated SGD with momentum."),
])



def _lamb_update(xp, inputs, outputs, params):
    weight, grad, mean, var = inputs
    step = _clip(xp, grad * params["rescale_grad"], params["clip_gradient"])
    beta1, beta2, t = params["beta1"], params["beta2"], params["t"]
    mean *= beta1
    mean += step * (1.0 - beta1)
    var *= beta2
    var += (step * step) * (1.0 - beta2)
    if params["bias_correction"]:
        direction = mean / (1.0 - beta1 ** t)
        denom = xp.sqrt(var / (1.0 - beta2 ** t))
    else:
        direction = mean.copy()
        denom = xp.sqrt(var)
    denom += params["epsilon"]
    direction /= denom
    if params["wd"]:
        direction += weight * params["wd"]
    # the layer-wise trust ratio ||w|| / ||direction||, ||w|| bounded when bounds are given
    weight_norm = float(xp.linalg.norm(weight.astype(xp.float32).ravel()))
    if params["lower_bound"] >= 0:
        weight_norm = max(weight_norm, params["lower_bound"])
    if params["upper_bound"] >= 0:
        weight_norm = min(weight_norm, params["upper_bound"])
    direction_norm = float(xp.linalg.norm(direction.astype(xp.float32).ravel()))
    ratio = weight_norm / direction_norm if weight_norm > 0 and direction_norm > 0 else 1.0
    direction *= params["lr"] * ratio
    xp.subtract(weight, direction, out=outputs[0])


def _lars_lr(xp: Any, weight: Any, grad: Any, params: dict) -> float:
    """MXNet's ``multi_lars``: ``lr * eta * ||w|| / (||g|| * rescale_grad + wd * ||w|| + eps)``,
    or ``lr`` when either norm is 0 or the layer is exempt (biases, BatchNorm's gamma/beta)."""
    lr = params["lr"]
    if not params["apply_lars"]:
        return lr
    weight_norm = float(xp.linalg.norm(weight.astype(xp.float32).ravel()))
    grad_norm = float(xp.linalg.norm(grad.astype(xp.float32).ravel()))
    if weight_norm > 0 and grad_norm > 0:
        lr = lr * params["eta"] * weight_norm / (grad_norm * params["rescale_grad"] + params["wd"] * weight_norm
                                                 + params["eps"])
    return lr


def _lars_sgd_update(xp, inputs, outputs, params):
    weight, grad = inputs[0], inputs[1]
    scaled = dict(params, lr=_lars_lr(xp, weight, grad, params))
    if len(inputs) == 3:
        _sgd_mom_update(xp, inputs, outputs, scaled)
    else:
        _sgd_update(xp, inputs, outputs, scaled)


_LARS_PARAMS = [Param("eta", _F, 0.001), Param("eps", _F, 0.0), Param("apply_lars", "bool", True),
                Param("lazy_update", "bool", True)]
define_update_ops([
    ("_lamb_update", _lamb_update, ("mean", "var"),
     [Param("beta1", _F, 0.9), Param("beta2", _F, 0.999), Param("epsilon", _F, 1e-6), Param("t", "int"),
      Param("bias_correction", "bool", True), Param("lower_bound", _F, -1.0), Param("upper_bound", _F, -1.0)],
     "LAMB (You et al. 2019): Adam's direction plus wd*w, scaled by the trust ratio ||w|| / ||direction||."),
    ("_lars_sgd_update", _lars_sgd_update, (), _LARS_PARAMS,
     "LARS: SGD with the layer-wise learning rate lr * eta * ||w|| / (||g'|| + wd*||w|| + eps)."),
    ("_lars_sgd_mom_update", _lars_sgd_update, ("mom",), [*_LARS_PARAMS, Param("momentum", _F, 0.0)],
     "LARS with momentum (MXNet's multi_lars then sgd_mom_update)."),
])

