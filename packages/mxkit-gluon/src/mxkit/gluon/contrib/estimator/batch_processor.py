"""``BatchProcessor``: how the Estimator runs one batch (split across devices, forward, loss,
backward); subclass it to change the step without rewriting ``fit``."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.utils import split_and_load


class BatchProcessor:
    """Runs one training or evaluation batch for an :class:`~mxkit.gluon.contrib.estimator.Estimator`.

    A batch is ``(data, label)``; each is split along ``batch_axis`` across the estimator's
    devices. Both methods return ``(data, label, pred, loss)``, lists with one entry per device.
    """

    def _get_data_and_label(self, batch: Any, ctx: list[Any], batch_axis: int = 0) -> tuple[list[Any], list[Any]]:
        data = split_and_load(batch[0], ctx_list=ctx, batch_axis=batch_axis)
        label = split_and_load(batch[1], ctx_list=ctx, batch_axis=batch_axis)
        return data, label

    def evaluate_batch(self, estimator: Any, val_batch: Any, batch_axis: int = 0) -> tuple[list, list, list, list]:
        """Forward ``val_batch`` through ``estimator.val_net`` and ``estimator.val_loss``."""
        data, label = self._get_data_and_label(val_batch, estimator.context, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label, strict=True)]
        return data, label, pred, loss

    def fit_batch(self, estimator: Any, train_batch: Any, batch_axis: int = 0) -> tuple[list, list, list, list]:
        """Forward ``train_batch`` under ``autograd.record()`` and backpropagate the loss.

        The parameters are not updated here: the ``GradientUpdateHandler`` steps the trainer.
        """
        from mxkit.ndarray import autograd

        data, label = self._get_data_and_label(train_batch, estimator.context, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label, strict=True)]
        for each in loss:
            each.backward()
        return data, label, pred, loss


__all__ = ["BatchProcessor"]
