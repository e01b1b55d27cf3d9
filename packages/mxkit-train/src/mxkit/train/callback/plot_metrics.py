"""Training and validation curves as PNG files, redrawn every epoch.

>>> plot = mx.callback.PlotMetrics("curves")
>>> mod.fit(train, eval_data=val, batch_end_callback=plot, eval_end_callback=plot, num_epoch=10)

writes ``curves/accuracy.png`` (and one file per other metric) with the training value of
each epoch and the validation value after it. ``fit`` gives the training metric only to
batch-end callbacks, so :class:`PlotMetrics` reads it at the last batch of each epoch
(before validation, which may reset the same metric object). A loop of one's own calls
:meth:`PlotMetrics.update` instead.

Drawing needs matplotlib (``pip install 'mxkit-train[plot]'``), imported at the first
picture; the Agg backend is used, so no display is needed.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mxkit.train._registry import TrainingValueError

TRAIN = "train"
VALIDATION = "validation"
ALL_METRICS_FILE = "all-metrics.png"  # every metric on one figure (a metric of that name gets all-metrics_.png)


@dataclass(frozen=True)
class MetricSeries:
    """One metric's curves: epochs and values, for training and for validation."""

    name: str
    train_epochs: tuple[int, ...]
    train_values: tuple[float, ...]
    validation_epochs: tuple[int, ...]
    validation_values: tuple[float, ...]


def metric_series(history: Mapping[str, Mapping[str, Mapping[int, float]]], name: str) -> MetricSeries:
    """The curves of metric ``name`` in ``history`` (``{"train"|"validation": {name: {epoch: value}}}``),
    by epoch."""
    train = sorted(history.get(TRAIN, {}).get(name, {}).items())
    validation = sorted(history.get(VALIDATION, {}).get(name, {}).items())
    return MetricSeries(name, tuple(e for e, _ in train), tuple(v for _, v in train),
                        tuple(e for e, _ in validation), tuple(v for _, v in validation))


def file_name_of(metric: str) -> str:
    """The PNG file name of a metric: ``"cross-entropy"`` -> ``"cross-entropy.png"``, unsafe characters as ``_``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", metric).strip("._") + ".png" if metric.strip("._ ") else "metric.png"
    return "all-metrics_.png" if name == ALL_METRICS_FILE else name


def _name_values(metric: Any) -> list[tuple[str, float]]:
    getter = getattr(metric, "get_global_name_value", None) or metric.get_name_value
    return [(str(name), float(value)) for name, value in getter()]


class PlotMetrics:
    """A callback drawing one PNG per metric: its training and validation value per epoch.

    Pass the same object as ``batch_end_callback`` (training values, read at the last batch
    of each epoch) and ``eval_end_callback`` (validation values) of ``Module.fit``; as an
    ``epoch_end_callback`` too it also works when the batch-end parameters carry no locals.
    Called with parameters that carry no locals it takes them for a training batch; a loop of
    one's own calls :meth:`eval_end` (or :meth:`update`) for validation values.
    The files are rewritten after each epoch, each atomically (a viewer never sees half a
    file).

    Parameters
    ----------
    directory : str or os.PathLike
        Where the PNG files go (created if missing).
    metrics : iterable of str, optional
        Only these metric names (default: every metric reported).

    Attributes
    ----------
    history : dict
        ``{"train": {name: {epoch: value}}, "validation": {...}}``.
    paths : dict of str to str
        The file written for each metric so far.
    """

    def __init__(self, directory: str | os.PathLike[str], metrics: Iterable[str] | None = None) -> None:
        if not isinstance(directory, str | os.PathLike) or not os.fspath(directory):
            raise TrainingValueError(f"PlotMetrics: directory must be a folder path like 'curves', got {directory!r}")
        self.directory = os.fspath(directory)
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            raise TrainingValueError(f"PlotMetrics: {self.directory!r} exists and is not a folder; give a folder "
                                     f"for the PNG files")
        if isinstance(metrics, str):
            metrics = [metrics]
        self.metrics = None if metrics is None else tuple(metrics)
        self.history: dict[str, dict[str, dict[int, float]]] = {TRAIN: {}, VALIDATION: {}}
        self.paths: dict[str, str] = {}
        self.combined_path: str | None = None  # all-metrics.png, every metric on one figure
        self._pending: tuple[int, Any] | None = None  # (epoch, training metric) until the epoch ends

    # -- recording --------------------------------------------------------------------

    def update(self, epoch: int, train: Any = None, validation: Any = None) -> None:
        """Record an epoch's values and redraw the metrics that changed.

        Parameters
        ----------
        epoch : int
            The epoch (from 0, as ``fit`` counts).
        train, validation : mapping of str to float, or list of (name, value), optional
            The metric values of that epoch.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise TrainingValueError(f"PlotMetrics.update: epoch must be an int >= 0, got {epoch!r}")
        changed: list[str] = []
        for kind, values in ((TRAIN, train), (VALIDATION, validation)):
            if values is None:
                continue
            pairs = values.items() if isinstance(values, Mapping) else values
            for name, value in pairs:
                if self.metrics is not None and name not in self.metrics:
                    continue
                self.history[kind].setdefault(str(name), {})[epoch] = float(value)
                changed.append(str(name))
        for name in dict.fromkeys(changed):
            self.draw(name)
        if changed:
            self.draw_all()

    def series(self, name: str) -> MetricSeries:
        """The recorded curves of metric ``name``."""
        return metric_series(self.history, name)

    # -- the callback protocols of fit ------------------------------------------------------

    def batch_end(self, param: Any) -> None:
        """``batch_end_callback``: the training values, at the epoch's last batch."""
        metric = getattr(param, "eval_metric", None)
        if metric is None:
            return
        local_vars = getattr(param, "locals", None)
        if isinstance(local_vars, Mapping) and "end_of_batch" in local_vars:
            if local_vars["end_of_batch"]:
                self.update(param.epoch, train=_name_values(metric))
            return
        self._pending = (param.epoch, metric)  # the epoch's end is not visible here: wait for epoch_end

    def epoch_end(self, epoch: int, symbol: Any = None, arg_params: Any = None, aux_params: Any = None) -> None:
        """``epoch_end_callback``: the training values remembered by :meth:`batch_end`, when
        it could not tell the epoch's last batch."""
        if self._pending is not None and self._pending[0] == epoch:
            self.update(epoch, train=_name_values(self._pending[1]))
        self._pending = None

    def eval_end(self, param: Any) -> None:
        """``eval_end_callback``: the validation values of the epoch."""
        metric = getattr(param, "eval_metric", None)
        if metric is not None:
            self.update(param.epoch, validation=_name_values(metric))

    def __call__(self, *args: Any) -> None:
        """Any of the three callbacks, told apart by their arguments."""
        if len(args) == 4 or (len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool)):
            self.epoch_end(*args)
            return
        if len(args) != 1 or not hasattr(args[0], "eval_metric"):
            raise TrainingValueError(
                f"PlotMetrics was called with {len(args)} arguments {args!r:.120}; use it as a batch_end, "
                f"eval_end or epoch_end callback of fit, or call update(epoch, train=..., validation=...)"
            )
        local_vars = getattr(args[0], "locals", None)
        local_vars = local_vars if isinstance(local_vars, Mapping) else {}
        # the parameters carry the caller's locals: fit's training loop has train_data, score has
        # eval_data only; without locals it is taken for a training batch (call eval_end to say otherwise)
        if "eval_data" in local_vars and "train_data" not in local_vars:
            self.eval_end(args[0])
        else:
            self.batch_end(args[0])

    # -- drawing ----------------------------------------------------------------------------

    def draw(self, name: str) -> str:
        """Write the PNG of metric ``name`` now; returns its path."""
        from mxkit.core.plotting import matplotlib_figure

        figure = matplotlib_figure("mx.callback.PlotMetrics", extra="mxkit-train[plot]")
        figure.set_size_inches(6.4, 4.0)
        draw_metric_series(self.series(name), figure.add_subplot())
        self.paths[name] = self._save(figure, file_name_of(name))
        return self.paths[name]

    def draw_all(self) -> str:
        """Write ``all-metrics.png``: every recorded metric side by side on one figure (accuracy
        and loss together, say); returns its path."""
        from mxkit.core.plotting import matplotlib_figure

        names = sorted({name for kind in self.history.values() for name in kind})
        figure = matplotlib_figure("mx.callback.PlotMetrics", extra="mxkit-train[plot]")
        figure.set_size_inches(4.8 * max(1, len(names)), 4.0)
        for index, name in enumerate(names):
            draw_metric_series(self.series(name), figure.add_subplot(1, len(names), index + 1))
        self.combined_path = self._save(figure, ALL_METRICS_FILE)
        return self.combined_path

    def _save(self, figure: Any, file_name: str) -> str:
        # durably, by rename: a viewer watching the file never sees half a PNG
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, file_name)
        from mxkit.core.files import atomic_open

        with atomic_open(path, "wb") as handle:
            figure.savefig(handle, format="png", dpi=100)
        return path


def draw_metric_series(series: MetricSeries, ax: Any) -> None:
    """Draw the training and validation curves of ``series`` into ``ax``."""
    from matplotlib.ticker import MaxNLocator

    # drawn from 1, as the console counts epochs ("epoch 1/8"); fit and the history count from 0
    if series.train_epochs:
        ax.plot([e + 1 for e in series.train_epochs], series.train_values, marker="o", markersize=4,
                color="tab:blue", label=f"train {_last(series.train_values)}")
    if series.validation_epochs:
        ax.plot([e + 1 for e in series.validation_epochs], series.validation_values, marker="s", markersize=4,
                color="tab:orange", label=f"validation {_last(series.validation_values)}")
    ax.set_title(series.name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(series.name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)


def _last(values: tuple[float, ...]) -> str:
    return "" if not values or math.isnan(values[-1]) else f"(last {values[-1]:.4g})"


__all__ = ["MetricSeries", "PlotMetrics", "draw_metric_series", "file_name_of", "metric_series"]
