"""``mx.mon.Monitor``: statistics of every array an executor computes, every ``interval`` batches.

As in MXNet 1.x: ``install`` the monitor on executors (or ``module.install_monitor(mon)``),
call ``tic()`` before a batch's forward and ``toc()`` (or ``toc_print()``) after its
backward; on every ``interval``-th batch ``toc`` returns ``(batch, name, statistic)`` for
each node output whose name matches ``pattern``, and for each argument.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def _default_stat(array: Any) -> Any:
    """MXNet's default statistic: ``norm(x) / sqrt(x.size)`` (the root mean square)."""
    values = array.asnumpy() if hasattr(array, "asnumpy") else np.asarray(array)
    return np.sqrt(np.mean(np.square(values.astype(np.float64))))


class Monitor:
    """Collect a statistic of the outputs (and with ``monitor_all`` the inputs) of every node.

    Parameters
    ----------
    interval : int
        Collect on every ``interval``-th batch (``tic`` counts batches).
    stat_func : callable, optional
        ``stat_func(NDArray) -> NDArray or number``; default: the root mean square.
    pattern : str
        A regular expression; only names it matches (``re.match``) are collected.
    sort : bool
        Sort each batch's results by name.
    monitor_all : bool
        Also collect every node's inputs, not only its outputs.
    """

    def __init__(self, interval: int, stat_func: Callable[[Any], Any] | None = None, pattern: str = ".*",
                 sort: bool = False, monitor_all: bool = False):
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f"Monitor interval must be a positive int, got {interval!r}")
        self.interval = interval
        self.stat_func = stat_func or _default_stat
        self.activated = False
        self.queue: list[tuple[int, str, Any]] = []
        self.step = 0
        self.exes: list[Any] = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

    def stat_helper(self, name: str, array: Any) -> None:
        """The executor's callback: record ``stat_func(array)`` under ``name`` while active."""
        if self.activated and self.re_prog.match(name):
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe: Any) -> None:
        """Make ``exe`` report its node outputs to this monitor."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        """Start a batch: activate collection if this batch is on the interval."""
        if self.step % self.interval == 0:
            for exe in self.exes:
                for array in exe.arg_arrays:
                    array.wait_to_read()
                for array in exe.aux_arrays:
                    array.wait_to_read()
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """End a batch: the ``(batch, name, statistic as text)`` collected since ``tic``."""
        if not self.activated:
            return []
        for exe in self.exes:
            for array in exe.arg_arrays:
                array.wait_to_read()
            for array in exe.aux_arrays:
                array.wait_to_read()
        for exe in self.exes:
            for name, array in exe.arg_dict.items():
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        results = []
        queue = sorted(self.queue, key=lambda item: item[1]) if self.sort else self.queue
        for step, name, value in queue:
            values = value if isinstance(value, list) else [value]
            text = ""
            for v in values:
                v = v.asnumpy() if hasattr(v, "asnumpy") else np.asarray(v)
                text += str(v.reshape(-1)[0] if v.size == 1 else v) + "\t"
            results.append((step, name, text))
        self.queue = []
        return results

    def toc_print(self) -> None:
        """:meth:`toc` and log each result at INFO level."""
        for step, name, text in self.toc():
            logger.info("Batch: %7d %30s %s", step, name, text)


__all__ = ["Monitor"]
