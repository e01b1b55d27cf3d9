"""A live, tqdm-style progress bar for training, without a dependency.

``Epoch 3:  45%|█████▍      | 45/100 [00:02<00:03, 20.1 batch/s, 2573 samples/s, accuracy=0.912]``

It redraws one line in place with ``\\r``, at most every ``min_interval`` seconds, and is
on by default only when its stream is a terminal: in a log file or a pipe a redrawn line
is noise, so there it stays silent unless ``enabled=True``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

from mxkit.train._registry import TrainingValueError

T = TypeVar("T")
_BLOCKS = " ▏▎▍▌▋▊▉█"


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes, captured output)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed stream
        return False


def format_interval(seconds: float) -> str:
    """``MM:SS`` or ``H:MM:SS``."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _bar(fraction: float, width: int) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, partial = divmod(eighths, 8)
    text = "█" * full + (_BLOCKS[partial] if full < width and partial else "")
    return text + " " * (width - len(text))


class ProgressLine:
    """One progress line redrawn in place.

    Parameters
    ----------
    total : int, optional
        Steps expected (without it the line shows a count and a rate).
    desc : str
        Text before the bar.
    file : stream, optional
        Where to draw (default: ``sys.stdout`` when the line starts).
    enabled : bool, optional
        Draw at all; default: only when ``file`` is a terminal.
    width : int, default 25
        Characters of the bar.
    min_interval : float, default 0.1
        Seconds between redraws (the first and last are always drawn).
    unit : str, default 'it'
        The unit of the rate.
    initial : int, default 0
        The count when the line starts; the rate counts the steps after it.
    """

    def __init__(self, total: int | None = None, desc: str = "", file: IO[str] | None = None,
                 enabled: bool | None = None, width: int = 25, min_interval: float = 0.1, unit: str = "it",
                 initial: int = 0) -> None:
        if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
            raise TrainingValueError(f"a progress bar's total must be a non-negative int or None, got {total!r}")
        self.total = total
        self.desc = desc
        self.file = file if file is not None else sys.stdout
        self.enabled = is_terminal(self.file) if enabled is None else bool(enabled)
        self.width = width
        self.min_interval = min_interval
        self.unit = unit
        self.initial = initial
        self.count = initial
        self.postfix = ""
        self.start_time = time.monotonic()
        self._last_draw = -float("inf")
        self._last_len = 0
        self.closed = False

    def update(self, count: int | None = None, postfix: str = "", force: bool = False) -> None:
        """Set the step count (default: one more) and the text after the rate; redraw if due."""
        self.count = self.count + 1 if count is None else count
        self.postfix = postfix
        now = time.monotonic()
        finished = self.total is not None and self.count >= self.total
        if force or finished or now - self._last_draw >= self.min_interval:
            self._last_draw = now
            self._draw(now)

    def render(self, now: float | None = None) -> str:
        """The line as it would be drawn now."""
        elapsed = (time.monotonic() if now is None else now) - self.start_time
        rate = (self.count - self.initial) / elapsed if elapsed > 0 else 0.0
        rate_text = f"{rate:.1f} {self.unit}/s" if rate else f"? {self.unit}/s"
        extra = f", {self.postfix}" if self.postfix else ""
        prefix = f"{self.desc}: " if self.desc else ""
        if self.total:
            fraction = self.count / self.total
            remaining = (self.total - self.count) / rate if rate else 0.0
            return (f"{prefix}{fraction * 100:3.0f}%|{_bar(fraction, self.width)}| {self.count}/{self.total} "
                    f"[{format_interval(elapsed)}<{format_interval(remaining)}, {rate_text}{extra}]")
        return f"{prefix}{self.count} {self.unit} [{format_interval(elapsed)}, {rate_text}{extra}]"

    def _draw(self, now: float) -> None:
        if not self.enabled or self.closed:
            return
        line = self.render(now)
        padding = " " * max(0, self._last_len - len(line))  # wipe the tail of a longer previous line
        self.file.write("\r" + line + padding)
        self.file.flush()
        self._last_len = len(line)

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.closed:
            return
        self._draw(time.monotonic())
        if self.enabled:
            self.file.write("\n")
            self.file.flush()
        self.closed = True


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "", file: IO[str] | None = None,
             enabled: bool | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate over ``iterable`` drawing a progress line (like ``tqdm(iterable)``)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    line = ProgressLine(total=total, desc=desc, file=file, enabled=enabled, unit=unit)
    try:
        for item in iterable:
            yield item
            line.update()
    finally:
        line.close()


class TerminalProgressBar:
    """A batch-end callback drawing one live progress line per epoch, with the speed and
    the training metric.

    Use it as ``batch_end_callback`` and its :meth:`epoch_end` as (one of the)
    ``epoch_end_callback``; a new epoch also closes the previous line by itself.

    Parameters
    ----------
    total : int, optional
        Batches per epoch, if known.
    batch_size : int, optional
        Samples per batch, to show samples/s.
    file : stream, optional
        Where to draw (default ``sys.stdout``).
    enabled : bool, optional
        Default: only when ``file`` is a terminal.
    min_interval : float, default 0.1
        Seconds between redraws.

    Examples
    --------
    >>> bar = mx.callback.TerminalProgressBar(total=train.num_batches, batch_size=128)
    >>> mod.fit(train, batch_end_callback=bar, epoch_end_callback=[bar.epoch_end, checkpoint])
    """

    def __init__(self, total: int | None = None, batch_size: int | None = None, file: IO[str] | None = None,
                 enabled: bool | None = None, min_interval: float = 0.1) -> None:
        self.total = total
        self.batch_size = batch_size
        self.file = file
        self.enabled = enabled
        self.min_interval = min_interval
        self.line: ProgressLine | None = None
        self._epoch: int | None = None

    @property
    def active(self) -> bool:
        """Whether the bar draws (a terminal, or ``enabled=True``)."""
        return self.enabled if self.enabled is not None else is_terminal(self.file or sys.stdout)

    def __call__(self, param: Any) -> None:
        if not self.active:
            return
        done = param.nbatch + 1  # MXNet's nbatch counts from 0 and is passed after the batch ran
        if self.line is None or param.epoch != self._epoch or done <= self.line.count:
            self.epoch_end()
            self._epoch = param.epoch
            # the clock starts when the first batch has finished, so rates count the batches after it
            self.line = ProgressLine(total=self.total, desc=f"Epoch {param.epoch}", file=self.file,
                                     enabled=self.enabled, min_interval=self.min_interval, unit="batch",
                                     initial=done)
        parts = []
        elapsed = time.monotonic() - self.line.start_time
        if self.batch_size and elapsed > 0:
            parts.append(f"{(done - self.line.initial) * self.batch_size / elapsed:.0f} samples/s")
        metric = getattr(param, "eval_metric", None)
        if metric is not None:
            parts.extend(f"{name}={value:.4g}" for name, value in metric.get_name_value())
        self.line.update(done, ", ".join(parts))

    def epoch_end(self, *args: Any) -> None:
        """End the current epoch's line (usable as an ``epoch_end_callback``)."""
        if self.line is not None:
            self.line.close()
            self.line = None


__all__ = ["ProgressLine", "TerminalProgressBar", "format_interval", "is_terminal", "progress"]
