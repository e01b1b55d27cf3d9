"""The :class:`EvalMetric` base class, the metric registry, composites and custom metrics.

Every metric keeps two running sums, as MXNet 1.x's do: the local ones (``sum_metric``,
``num_inst``), which :meth:`EvalMetric.reset_local` clears (``Speedometer`` does so after
each report), and the global ones (``global_sum_metric``, ``global_num_inst``) over
everything since :meth:`EvalMetric.reset`. ``get()`` returns ``(name, local value)``,
``get_global()`` ``(name, global value)``.

Labels and predictions may be NDArrays (converted with one ``asnumpy()`` each, the sync
point) or numpy arrays, and a single array counts as a list of one. A metric whose
per-batch sum is a count (``Accuracy``) computes it on the engine instead, from NDArrays
on one device, and reads it back only when a sum is read (``get()``, a log line): a
training loop that updates it every step then never waits for the step to finish.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import NameRegistry, TrainingValueError, UnknownNameError

_METRICS = NameRegistry("metric")


def as_numpy(value: Any) -> np.ndarray:
    """``value`` as a numpy array (``asnumpy()`` for NDArrays)."""
    asnumpy = getattr(value, "asnumpy", None)
    if asnumpy is not None:
        return asnumpy()
    return np.asarray(value)


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "asnumpy")


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False) -> tuple[Any, Any]:
    """Check that ``labels`` and ``preds`` agree in length (or in shape, with ``shape=True``).

    With ``wrap=True`` a single array becomes a list of one. Raises :class:`ShapeError`.
    """
    if wrap:
        labels = [labels] if _is_array(labels) else labels
        preds = [preds] if _is_array(preds) else preds
    if shape:
        label_shape, pred_shape = tuple(labels.shape), tuple(preds.shape)
        what = "shape"
    else:
        label_shape, pred_shape = len(labels), len(preds)
        what = "number"
    if label_shape != pred_shape:
        raise ShapeError(f"{what} of labels {label_shape} does not match {what} of predictions {pred_shape}")
    return labels, preds


_ndarray_api: list[Any] = []  # (NDArray, backend_of, push_raw), imported on first use


def _ndarray() -> tuple[Any, Any, Any]:
    if not _ndarray_api:
        from mxkit.ndarray import NDArray
        from mxkit.ndarray.invoke import backend_of, push_raw

        _ndarray_api[:] = [NDArray, backend_of, push_raw]
    return _ndarray_api[0], _ndarray_api[1], _ndarray_api[2]


def on_one_device(arrays: list[Any]) -> bool:
    """True if ``arrays`` are all mxkit NDArrays on one device (what :func:`count_on_device` takes)."""
    ndarray_type = _ndarray()[0]
    ctx = None
    for array in arrays:
        if not isinstance(array, ndarray_type):
            return False
        if ctx is None:
            ctx = array.context
        elif array.context is not ctx and array.context != ctx:
            return False
    return ctx is not None


def count_on_device(compute: Callable[..., Any], arrays: list[Any], name: str) -> Any:
    """Push ``compute(xp, *storages)`` (an integer) as an engine operation reading ``arrays``
    and return the one-element float64 NDArray it writes; None unless ``arrays`` are all
    mxkit NDArrays on one device (the caller then computes on the host).

    ``compute`` runs on an engine worker with the backend's array module ``xp`` (numpy on a
    CPU), so the host formula can be used unchanged and gives the same count."""
    if not on_one_device(arrays):
        return None
    ndarray_type, backend_of, push_raw = _ndarray()
    ctx = arrays[0].context
    backend = backend_of(ctx)
    target = backend.empty((1,), np.float64)
    out = ndarray_type.from_storage(target, ctx)
    xp = backend.xp

    def run() -> None:
        target[...] = compute(xp, *[array.storage for array in arrays])

    push_raw(run, arrays, [out], ctx, name, overwrites=True)
    return out


class EvalMetric:
    """Base class of evaluation metrics (MXNet 1.x's ``mx.metric.EvalMetric``).

    Parameters
    ----------
    name : str
        The metric's display name.
    output_names, label_names : list of str, optional
        Which predictions and labels :meth:`update_dict` uses (default: all).
    **kwargs
        Constructor arguments of the subclass, kept for :meth:`get_config`.
    """

    def __init__(self, name: str, output_names: list[str] | None = None, label_names: list[str] | None = None,
                 **kwargs: Any) -> None:
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict[str, Any]:
        """The arguments that rebuild this metric with ``mx.metric.create(**config)``."""
        config = dict(self._kwargs)
        config.update({"metric": type(self).__name__, "name": self.name, "output_names": self.output_names,
                       "label_names": self.label_names})
        return config

    def update_dict(self, label: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
        """:meth:`update` with named labels and predictions (chosen by ``label_names``/``output_names``)."""
        preds = [pred[name] for name in self.output_names] if self.output_names is not None else list(pred.values())
        labels = [label[name] for name in self.label_names] if self.label_names is not None \
            else list(label.values())
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        """Add one batch of ``labels`` and ``preds`` (lists of arrays)."""
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    def _add(self, value: float, count: float) -> None:
        """Add ``value`` over ``count`` instances to the local and the global sums."""
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    # Counts still being computed on the engine (NDArrays from count_on_device), added to
    # both sums, in update order, the first time a sum is read.
    _pending: Any = ()

    def _add_on_device(self, value: Any, count: float) -> None:
        """Add the integer in the one-element NDArray ``value`` (not read now) over ``count``
        instances to the local and global sums."""
        if not self._pending:
            self._pending = []
        self._pending.append(value)
        self.num_inst += count
        self.global_num_inst += count

    def _settle(self) -> None:
        pending, self._pending = self._pending, ()
        for value in pending:
            number = int(value.asnumpy()[0])  # the sync point: once per read, not per batch
            self._sum_metric += number
            self._global_sum_metric += number

    @property
    def sum_metric(self) -> Any:
        """The local sum (reading it waits for the counts still on the engine)."""
        if self._pending:
            self._settle()
        return self._sum_metric

    @sum_metric.setter
    def sum_metric(self, value: Any) -> None:
        if self._pending:
            self._settle()
        self._sum_metric = value

    @property
    def global_sum_metric(self) -> Any:
        """The global sum (reading it waits for the counts still on the engine)."""
        if self._pending:
            self._settle()
        return self._global_sum_metric

    @global_sum_metric.setter
    def global_sum_metric(self, value: Any) -> None:
        if self._pending:
            self._settle()
        self._global_sum_metric = value

    def reset(self) -> None:
        """Clear the local and global sums."""
        self._pending = ()
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self) -> None:
        """Clear the local sums only."""
        if self._pending:
            self._settle()  # the global sums keep them
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self) -> tuple[Any, Any]:
        """``(name, value)`` over the batches since the last local reset (``nan`` if none)."""
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, float(self.sum_metric / self.num_inst))

    def get_global(self) -> tuple[Any, Any]:
        """``(name, value)`` over the batches since the last :meth:`reset`."""
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, float(self.global_sum_metric / self.global_num_inst))

    def get_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of :meth:`get`."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]`` of :meth:`get_global`."""
        return _zip_name_value(*self.get_global())


def _zip_name_value(name: Any, value: Any) -> list[tuple[str, float]]:
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))


def register(klass: type) -> type:
    """Register a metric class under its lower-cased name (a class decorator)."""
    if not (isinstance(klass, type) and issubclass(klass, EvalMetric)):
        raise TrainingValueError(f"only subclasses of EvalMetric can be registered as metrics, got {klass!r}")
    return _METRICS.register(klass)


def alias(*aliases: str) -> Callable[[type], type]:
    """A class decorator registering a metric under extra names."""
    return _METRICS.alias(*aliases)


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name (``"acc"``, ``"ce"``...), an :class:`EvalMetric` (returned
    as is), a list of those (a :class:`CompositeEvalMetric`), or a function
    ``feval(label, pred)`` (a :class:`CustomMetric`).

    ``create(**metric.get_config())`` rebuilds a registered metric.

    Raises
    ------
    UnknownNameError
        For an unknown name (the message lists the choices).
    """
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, str) and metric.lstrip().startswith(("{", "[")):
        return _create_from_json(metric, args, kwargs)
    if isinstance(metric, str):
        return _METRICS.lookup(metric)(*args, **kwargs)
    if isinstance(metric, Mapping):
        return _create_from_config(metric)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    raise UnknownNameError(f"a metric is a name, an EvalMetric, a list of those or a function feval(label, pred); "
                           f"got {type(metric).__name__} {metric!r}; registered names: {', '.join(sorted(_METRICS))}")


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns lists of names and values.

    Parameters
    ----------
    metrics : list, optional
        Child metrics (anything :func:`create` takes).
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, metrics: list[Any] | None = None, name: str = "composite",
                 output_names: list[str] | None = None, label_names: list[str] | None = None) -> None:
        self.metrics: list[EvalMetric] = []
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric: Any) -> None:
        """Add a child metric."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        """The child metric at ``index``."""
        try:
            return self.metrics[index]
        except IndexError:
            raise TrainingValueError(f"metric index {index} is out of range: this composite has "
                                     f"{len(self.metrics)} metrics") from None

    def update_dict(self, labels: Mapping[str, Any], preds: Mapping[str, Any]) -> None:
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        super().reset()
        for metric in self.metrics:
            metric.reset()

    def reset_local(self) -> None:
        super().reset_local()
        for metric in self.metrics:
            metric.reset_local()

    def _collect(self, global_values: bool) -> tuple[list[str], list[float]]:
        names: list[str] = []
        values: list[float] = []
        for metric in self.metrics:
            name, value = metric.get_global() if global_values else metric.get()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get(self) -> tuple[Any, Any]:
        return self._collect(False)

    def get_global(self) -> tuple[Any, Any]:
        return self._collect(True)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


def _create_from_json(text: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> EvalMetric:
    """MXNet's registry strings: ``json.dumps(metric.get_config())`` or ``'["name", {kwargs}]'``."""
    if args or kwargs:
        raise UnknownNameError("a metric given as a JSON string takes its arguments from the string, "
                               f"not from extra arguments {args or ''}{dict(kwargs) or ''}")
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnknownNameError(f"a metric string starting with '{{' or '[' must be JSON "
                               f"(json.dumps(metric.get_config())): {exc}") from None
    if isinstance(spec, Mapping) and "metric" in spec:
        return _create_from_config(spec)
    if isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], Mapping):
        return create(spec[0], **spec[1])
    raise UnknownNameError(f"a metric JSON string must be a config {{\"metric\": name, ...}} or [name, {{kwargs}}], "
                           f"got {text[:200]!r}")


def _create_from_config(config: Mapping[str, Any]) -> EvalMetric:
    config = dict(config)
    name = config.pop("metric")
    if "metrics" in config:
        config["metrics"] = [_create_from_config(c) if isinstance(c, Mapping) else c for c in config["metrics"]]
    return create(name, **config)


@register
class CustomMetric(EvalMetric):
    """A metric from a function ``feval(label, pred)`` of numpy arrays, returning a value
    (averaged over batches) or ``(sum, count)``.

    Parameters
    ----------
    feval : callable
    name : str, optional
        Default: the function's name (``custom(<lambda>)`` for lambdas).
    allow_extra_outputs : bool, default False
        Allow more predictions than labels (the extra ones are ignored).
    output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, feval: Callable[[np.ndarray, np.ndarray], Any], name: str | None = None,
                 allow_extra_outputs: bool = False, output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        if not callable(feval):
            raise TrainingValueError(f"CustomMetric needs a function feval(label, pred), got {feval!r}")
        if name is None:
            name = getattr(feval, "__name__", "custom")
            if "<" in name:
                name = f"custom({name})"
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        else:
            labels = [labels] if _is_array(labels) else labels
            preds = [preds] if _is_array(preds) else preds
        for pred, label in zip(preds, labels):
            result = self._feval(as_numpy(label), as_numpy(pred))
            if isinstance(result, tuple):
                if len(result) != 2:
                    raise TrainingValueError(f"custom metric {self.name!r} returned a tuple of {len(result)}; "
                                             f"return a number or (sum_metric, num_inst)")
                self._add(result[0], result[1])
            else:
                self._add(result, 1)

    def get_config(self) -> dict[str, Any]:
        raise TrainingValueError(f"custom metric {self.name!r} wraps a Python function and cannot be described; "
                                 f"register an EvalMetric subclass to make it serializable")


def np_metric(numpy_feval: Callable[[np.ndarray, np.ndarray], Any], name: str | None = None,
              allow_extra_outputs: bool = False) -> CustomMetric:
    """A :class:`CustomMetric` from a numpy function (MXNet's ``mx.metric.np``)."""
    def feval(label: np.ndarray, pred: np.ndarray) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = getattr(numpy_feval, "__name__", "custom")
    return CustomMetric(feval, name, allow_extra_outputs)


__all__ = ["CompositeEvalMetric", "CustomMetric", "EvalMetric", "alias", "as_numpy", "check_label_shapes",
           "count_on_device", "create", "np_metric", "on_one_device", "register"]
