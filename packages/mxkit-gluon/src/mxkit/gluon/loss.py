"""Gluon's losses (``mx.gluon.loss``), MXNet 1.9.1's formulas.

Each loss returns one value per sample: the elementwise loss, weighted, averaged over
every axis but ``batch_axis``.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import HybridBlock


def _apply_weighting(F: Any, loss: Any, weight: float | None = None, sample_weight: Any = None) -> Any:
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        loss = loss * weight
    return loss


def _reshape_like(F: Any, x: Any, y: Any) -> Any:
    from mxkit import ndarray

    return x.reshape(y.shape) if F is ndarray else F.reshape_like(x, y)


class Loss(HybridBlock):
    """The base class of losses.

    Parameters
    ----------
    weight : float or None
        A global scale of the loss.
    batch_axis : int
        The axis of the samples.
    """

    def __init__(self, weight: float | None, batch_axis: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = batch_axis

    def _per_sample(self, F: Any, loss: Any, sample_weight: Any, weight: float | None = None) -> Any:
        loss = _apply_weighting(F, loss, self._weight if weight is None else weight, sample_weight)
        return F.mean(loss, axis=self._batch_axis, exclude=True)


class L2Loss(Loss):
    """``weight / 2 * (label - pred) ** 2``."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        return self._per_sample(F, F.square(label - pred), sample_weight, self._weight / 2)


class L1Loss(Loss):
    """``weight * |label - pred|``."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        return self._per_sample(F, F.abs(label - pred), sample_weight)


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of ``sigmoid(pred)`` (or ``pred`` with ``from_sigmoid``) and ``label``,
    in the stable form ``max(x, 0) - x * z + log(1 + exp(-|x|))``."""

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None, pos_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        if not self._from_sigmoid:
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
            else:
                log_weight = 1 + F.broadcast_mul(pos_weight - 1, label)
                loss = pred - pred * label + log_weight * (F.Activation(-F.abs(pred), act_type="softrelu")
                                                           + F.relu(-pred))
        else:
            eps = 1e-12
            if pos_weight is None:
                loss = -(F.log(pred + eps) * label + F.log(1.0 - pred + eps) * (1.0 - label))
            else:
                loss = -(F.broadcast_mul(F.log(pred + eps) * label, pos_weight)
                         + F.log(1.0 - pred + eps) * (1.0 - label))
        return self._per_sample(F, loss, sample_weight)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy of ``softmax(pred)`` and ``label`` (class indices with ``sparse_label``,
    else distributions)."""

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = _reshape_like(F, label, pred)
            loss = -F.sum(pred * label, axis=self._axis, keepdims=True)
        return self._per_sample(F, loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class KLDivLoss(Loss):
    """``label * (log(label) - pred)`` with ``pred`` log-probabilities (``from_logits``), summed per sample."""

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return F.sum(loss, axis=self._batch_axis, exclude=True)  # MXNet 1.9.1 sums here, unlike the others


class HuberLoss(Loss):
    """``|d| - rho / 2`` where ``|d| > rho``, else ``d ** 2 / (2 rho)``, with ``d = label - pred``."""

    def __init__(self, rho: float = 1, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        loss = F.abs(label - pred)
        loss = F.where(loss > self._rho, loss - 0.5 * self._rho, (0.5 / self._rho) * F.square(loss))
        return self._per_sample(F, loss, sample_weight)


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` with labels in {-1, 1}."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        return self._per_sample(F, F.relu(self._margin - pred * label), sample_weight)


class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred * label) ** 2``."""

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        return self._per_sample(F, F.square(F.relu(self._margin - pred * label)), sample_weight)


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))``: labels in {-1, 1} (``'signed'``) or {0, 1} (``'binary'``)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, label_format: str = "signed",
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            from mxkit.gluon.parameter import GluonError

            raise GluonError(f"LogisticLoss: label_format must be 'signed' or 'binary', got {label_format!r}")
        self._label_format = label_format

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _reshape_like(F, label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + F.Activation(-F.abs(pred), act_type="softrelu")
        return self._per_sample(F, loss, sample_weight)


class TripletLoss(Loss):
    """``max(0, |pos - pred|^2 - |neg - pred|^2 + margin)`` per sample."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, positive: Any, negative: Any, sample_weight: Any = None) -> Any:
        positive = _reshape_like(F, positive, pred)
        negative = _reshape_like(F, negative, pred)
        loss = F.sum(F.square(positive - pred) - F.square(negative - pred), axis=self._batch_axis, exclude=True)
        loss = F.relu(loss + self._margin)
        return _apply_weighting(F, loss, self._weight, sample_weight)


class PoissonNLLLoss(Loss):
    """Negative log-likelihood of ``target`` under a Poisson distribution of mean ``exp(pred)``
    (``from_logits``) or ``pred``, averaged over every element (MXNet 1.9.1's reduction)."""

    def __init__(self, weight: float | None = None, from_logits: bool = True, batch_axis: int = 0,
                 compute_full: bool = False, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F: Any, pred: Any, target: Any, sample_weight: Any = None,
                       epsilon: float = 1e-08) -> Any:
        import math

        target = _reshape_like(F, target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            stirling = target * F.log(target) - target + 0.5 * F.log(2 * target * math.pi)
            loss = loss + stirling * (target > 1)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return F.mean(loss)


class CosineEmbeddingLoss(Loss):
    """``1 - cos(input1, input2)`` for label 1, ``max(0, cos(input1, input2) - margin)`` for label -1,
    per sample (shape ``(batch, 1)``, as MXNet 1.9.1 returns it); the cosine's denominator is at
    least 1e-12."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, margin: float = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, input1: Any, input2: Any, label: Any, sample_weight: Any = None) -> Any:
        input1 = _reshape_like(F, input1, input2)
        label = label.reshape((-1, 1))
        cos_sim = self._cosine_similarity(F, input1, input2)
        similar = (1 - cos_sim) * (label == 1)
        dissimilar = F.broadcast_maximum(F.zeros((1, 1)), (label == -1) * (cos_sim - self._margin))
        return _apply_weighting(F, similar + dissimilar, self._weight, sample_weight)

    @staticmethod
    def _cosine_similarity(F: Any, x: Any, y: Any, axis: int = -1) -> Any:
        x_norm = F.norm(x, axis=axis).reshape((-1, 1))
        y_norm = F.norm(y, axis=axis).reshape((-1, 1))
        x_dot_y = F.sum(x * y, axis=axis).reshape((-1, 1))
        return x_dot_y / F.maximum(x_norm * y_norm, 1e-12)


class SDMLLoss(Loss):
    """Smoothed deep metric learning loss of aligned batches ``x1``, ``x2`` of shape ``(batch, dim)``:
    the KL divergence between the softmax of the negative squared distances of every pair and
    smoothed identity labels (``1 - smoothing_parameter`` on the diagonal, the rest spread evenly).
    Like MXNet's, it reads the batch size from the arrays, so it runs imperatively only."""

    def __init__(self, smoothing_parameter: float = 0.3, weight: float | None = 1.0, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def hybrid_forward(self, F: Any, x1: Any, x2: Any) -> Any:
        from mxkit import ndarray
        from mxkit.gluon.parameter import GluonError

        if F is not ndarray:
            raise GluonError("SDMLLoss reads the batch size from its inputs; call it on NDArrays, not hybridized")
        if x1.shape != x2.shape or x1.ndim != 2:
            raise GluonError(f"SDMLLoss takes two batches of one (batch, dim) shape, got {x1.shape} and {x2.shape}")
        batch, dim = x1.shape
        if batch < 2:
            raise GluonError(f"SDMLLoss needs at least 2 samples per batch (the others are the negatives), got {batch}")
        gold = F.eye(batch, ctx=x1.context)
        labels = gold * (1 - self.smoothing_parameter) + (1 - gold) * self.smoothing_parameter / (batch - 1)
        left = x1.expand_dims(1).broadcast_to((batch, batch, dim))
        right = x2.expand_dims(0).broadcast_to((batch, batch, dim))
        distances = ((left - right) ** 2).sum(axis=2)
        return self.kl_loss(F.log_softmax(-distances, axis=1), labels)


class CTCLoss(Loss):
    """Connectionist temporal classification over the ``CTCLoss`` operator, blank label last.

    ``pred`` is ``'NTC'`` or ``'TNC'`` (``layout``) unnormalised scores, ``label`` ``'NT'`` or ``'TN'``
    (``label_layout``); ``pred_lengths`` and ``label_lengths`` are optional per-sample lengths."""

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: float | None = None,
                 **kwargs: Any) -> None:
        from mxkit.gluon.parameter import GluonError

        if layout not in ("NTC", "TNC"):
            raise GluonError(f"CTCLoss: layout must be 'NTC' or 'TNC', got {layout!r}")
        if label_layout not in ("NT", "TN"):
            raise GluonError(f"CTCLoss: label_layout must be 'NT' or 'TN', got {label_layout!r}")
        self._layout = layout
        self._label_layout = label_layout
        super().__init__(weight, label_layout.find("N"), **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, pred_lengths: Any = None, label_lengths: Any = None,
                       sample_weight: Any = None) -> Any:
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        inputs = [pred, label] + [x for x in (pred_lengths, label_lengths) if x is not None]
        loss = F.CTCLoss(*inputs, use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return _apply_weighting(F, loss, self._weight, sample_weight)


__all__ = [
    "CTCLoss", "CosineEmbeddingLoss", "HingeLoss", "HuberLoss", "KLDivLoss", "L1Loss", "L2Loss", "LogisticLoss",
    "Loss", "PoissonNLLLoss", "SDMLLoss", "SigmoidBCELoss", "SigmoidBinaryCrossEntropyLoss", "SoftmaxCELoss",
    "SoftmaxCrossEntropyLoss", "SquaredHingeLoss", "TripletLoss",
]
