"""``mxkit train``: train a network on the digits (or a ``.rec``/``.csv``) with a Module.

With no arguments it trains a LeNet-style network on scikit-learn's handwritten digits,
packed to RecordIO in the user's cache on first use, printing a progress bar per epoch,
the training and validation metrics and the speed of every epoch, writing a checkpoint
per epoch (MXNet's format), and ending with the validation accuracy and where the model is.
Ctrl-C stops after the current batch and saves a checkpoint first.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError

DEFAULTS = {"network": "lenet", "data": "digits", "epochs": 8, "batch_size": 32, "lr": 0.1, "optimizer": "sgd",
            "ctx": "cpu:0", "kvstore": "local", "seed": 42}


class TrainingInterrupted(Exception):
    """Raised after the batch during which Ctrl-C was pressed."""


def parse_contexts(spec: str) -> list[Any]:
    """``cpu:0,cpu:1`` or ``gpu:0`` (or ``cpu(0)``) as a list of Contexts."""
    from mxkit.core.context import Context

    contexts = []
    for item in spec.split(","):
        text = item.strip().replace("(", ":").rstrip(")")
        kind, _, index = text.partition(":")
        if not kind or (index and not index.isdigit()):
            raise ConfigError(f"--ctx {spec!r}: {item!r} is not a device; write devices like cpu:0,cpu:1 or gpu:0")
        contexts.append(Context(kind, int(index or 0)))
    return contexts


def default_prefix(network: str, data: str) -> Path:
    """Where checkpoints go by default: ``$XDG_CACHE_HOME/mxkit/models/<network>-<data>``, or
    ``<network>-<data>-run<N>`` with the first N whose prefix holds no checkpoint yet, so that
    a new run never overwrites the epochs of an earlier one."""
    from mxkit.mx.train_data import cache_directory
    from mxkit.train.model.checkpoint import saved_epochs

    name = "digits" if data == "digits" else Path(data).stem
    directory: Path = cache_directory()
    prefix = directory / "models" / f"{network}-{name}"
    run = 1
    while saved_epochs(str(prefix)) or os.path.exists(f"{prefix}-symbol.json"):
        run += 1
        prefix = directory / "models" / f"{network}-{name}-run{run}"
    return prefix


def _count(number: int, noun: str) -> str:
    """``1 epoch``, ``2 epochs``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


class _StopOnInterrupt:
    """SIGINT sets a flag that the batch-end callback turns into :class:`TrainingInterrupted`.

    A second Ctrl-C while stopping restores Python's default and interrupts at once.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> _StopOnInterrupt:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        self.requested = True
        print("\nmxkit train: stopping after this batch (Ctrl-C again to abort without saving)", file=sys.stderr,
              flush=True)


class _EpochReporter:
    """One line per epoch with the metrics and the training speed; turns Ctrl-C into a stop."""

    def __init__(self, num_epoch: int, batches: int, batch_size: int, stop: _StopOnInterrupt) -> None:
        self.num_epoch = num_epoch
        self.batches = batches
        self.batch_size = batch_size
        self.stop = stop
        self.tic = time.perf_counter()
        self.train_seconds = 0.0
        self.position: tuple[int, int] = (0, 0)

    def batch_end(self, param: Any) -> None:
        if param.nbatch == 0:
            self.tic = time.perf_counter()
        self.position = (param.epoch, param.nbatch + 1)
        done_epoch = param.nbatch + 1 == self.batches
        if done_epoch:
            self.train_seconds = time.perf_counter() - self.tic
        if self.stop.requested and not done_epoch:
            raise TrainingInterrupted

    def epoch_end(self, train_metric: Any, validation: dict[str, float], epoch: int) -> None:
        seconds = self.train_seconds or (time.perf_counter() - self.tic)
        # the clock starts after the first batch, so the rate counts the batches after it
        speed = (self.batches - 1) * self.batch_size / max(seconds, 1e-9) if self.batches > 1 else 0.0
        train = "  ".join(f"train-{n} {v:.4f}" for n, v in train_metric.get_name_value())
        val = "  ".join(f"val-{n} {v:.4f}" for n, v in validation.items())
        print(f"epoch {epoch + 1}/{self.num_epoch}  {train}  {val}  {speed:,.0f} samples/s"
              f"  {seconds:.2f} s", flush=True)
        if self.stop.requested:
            raise TrainingInterrupted


def _metric_plotter(directory: str | None) -> Any:
    """A ``PlotMetrics`` for ``--plot-dir``, checked before training starts (folder and matplotlib)."""
    if directory is None:
        return None
    import mxkit.mx as mx
    from mxkit.core.plotting import matplotlib_figure

    matplotlib_figure("mxkit train --plot-dir", extra="mxkit[plot]")
    return mx.callback.PlotMetrics(directory)


def _train_iterator(dataset: Any, batch_size: int, rank: int = 0, num_workers: int = 1) -> Any:
    """Batches of worker ``rank``'s shard of the training set.

    Every worker gets the same number of samples (the remainder of an uneven split is left
    out), hence the same number of batches: a ``dist_sync`` round needs every worker's push,
    so one worker with an extra batch would wait for pushes that never come.
    """
    import mxkit.mx as mx

    count = len(dataset.train_data) // num_workers
    if not 1 <= batch_size <= count:
        shard = f" of worker {rank}'s shard (1/{num_workers})" if num_workers > 1 else ""
        raise ConfigError(f"--batch-size must be between 1 and the {count} training samples{shard}, got {batch_size}")
    rows = slice(rank * count, (rank + 1) * count)
    return mx.io.NDArrayIter(dataset.train_data[rows], dataset.train_label[rows], batch_size, shuffle=True,
                             last_batch_handle="discard")


def _validation(module: Any, data: np.ndarray, labels: np.ndarray, batch_size: int) -> dict[str, float]:
    """Exact accuracy and cross-entropy over every sample (the padding of the last batch
    excluded, unlike ``Module.score``), from one prediction pass."""
    import mxkit.mx as mx

    probabilities = module.predict(mx.io.NDArrayIter(data, labels, min(batch_size, len(data)))).asnumpy()
    classes = labels.astype(np.int64)
    picked = probabilities[np.arange(len(classes)), classes].astype(np.float64)
    # the same floor as mx.metric's CrossEntropy (eps 1e-12), so train and validation compare
    return {"accuracy": float((probabilities.argmax(axis=1) == classes).mean()),
            "cross-entropy": float(-np.log(np.maximum(picked, 1e-12)).mean())}


def _resume_point(prefix: str, contexts: list[Any], memplan: str | None) -> tuple[Any, int]:
    """The module of the latest checkpoint of ``prefix`` (with its optimizer state when saved) and its epoch."""
    import mxkit.mx as mx
    from mxkit.train.model import CheckpointError
    from mxkit.train.model.checkpoint import saved_epochs

    epochs = saved_epochs(prefix)
    if not epochs:
        raise CheckpointError(f"--resume {prefix!r}: no checkpoint {prefix}-NNNN.params exists; give the prefix of "
                              f"a run (the path before -symbol.json)")
    states = os.path.exists(f"{prefix}-{epochs[-1]:04d}.states")
    module = mx.mod.Module.load(prefix, epochs[-1], load_optimizer_states=states, context=contexts, memplan=memplan)
    return module, epochs[-1]


def _interrupted(module: Any, prefix: str, position: tuple[int, int], batches: int, epochs: int) -> int:
    epoch, nbatch = position
    saved = epoch + 1
    if nbatch < batches:  # stopped inside the epoch: save what the finished batches learnt
        module.save_checkpoint(prefix, saved, save_optimizer_states=True)
    print(f"mxkit train: interrupted in epoch {epoch + 1} after batch {nbatch}/{batches}; saved "
          f"{prefix}-{saved:04d}.params (resume with: mxkit train --resume {prefix} --epochs {epochs})",
          flush=True)
    return 130


def run_train(args: argparse.Namespace) -> int:
    """Run ``mxkit train``; returns the exit status (130 after Ctrl-C)."""
    if args.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, got {args.epochs}")
    if args.lr <= 0:
        raise ConfigError(f"--lr must be positive, got {args.lr}")
    from contextlib import ExitStack

    with ExitStack() as stack:
        if args.engine:
            import mxkit.engine

            previous = mxkit.engine.set_engine(args.engine)
            stack.callback(mxkit.engine.set_engine, previous)  # in-process callers get their engine back
        if args.memplan:
            from mxkit.core import config

            stack.enter_context(config.override(memplan=args.memplan))
        return _train(args)


def _train(args: argparse.Namespace) -> int:
    import mxkit.mx as mx
    from mxkit.mx.train_data import load_dataset
    from mxkit.mx.train_networks import build_network

    np.random.seed(args.seed)
    mx.random.seed(args.seed)
    contexts = parse_contexts(args.ctx)
    dataset = load_dataset(args.data, drop_nonfinite=getattr(args, "drop_nonfinite", False))
    begin_epoch = 0
    if args.resume:
        prefix = args.resume
        module, begin_epoch = _resume_point(prefix, contexts, args.memplan)
        if begin_epoch >= args.epochs:
            raise ConfigError(f"--resume {prefix!r} is at epoch {begin_epoch}; ask for more --epochs than that "
                              f"(got {args.epochs})")
    else:
        prefix = str(args.model_prefix or default_prefix(args.network, args.data))
        symbol = build_network(args.network, dataset.sample_shape, dataset.num_classes)
        module = mx.mod.Module(symbol, context=contexts, memplan=args.memplan)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    # a distributed store is made here, not in fit: its rank chooses this worker's data shard
    kvstore = mx.kv.create(args.kvstore) if str(args.kvstore).startswith("dist") else args.kvstore
    rank, num_workers = (kvstore.rank, kvstore.num_workers) if not isinstance(kvstore, str) else (0, 1)
    train_iter = _train_iterator(dataset, args.batch_size, rank, num_workers)
    worker = f", worker {rank} of {num_workers} ({args.kvstore})" if num_workers > 1 else ""
    print(f"mxkit train: {args.network if not args.resume else 'resumed'} on {dataset.source} "
          f"({len(dataset.train_data)} training, {len(dataset.val_data)} validation samples of shape "
          f"{dataset.sample_shape}), {_count(len(contexts), 'device')} {','.join(map(str, contexts))}, "
          f"batch {args.batch_size}, {args.optimizer} lr {args.lr}{worker}", flush=True)

    optimizer_params: dict[str, Any] = {"learning_rate": args.lr}
    if args.optimizer == "sgd":
        optimizer_params.update(momentum=0.9, wd=1e-4)
    train_metric = mx.metric.create(["acc", "ce"])
    batches = len(train_iter)
    plotter = _metric_plotter(args.plot_dir)
    val_accuracy = [float("nan")]
    with _StopOnInterrupt() as stop:
        reporter = _EpochReporter(args.epochs, batches, args.batch_size, stop)
        # a live progress line per epoch, drawn only when stderr is a terminal
        progress_bar = mx.callback.TerminalProgressBar(total=batches, batch_size=args.batch_size, file=sys.stderr)

        def epoch_end(epoch: int, sym: Any, arg: dict[str, Any], aux: dict[str, Any]) -> None:
            progress_bar.epoch_end()
            if rank == 0:  # the workers of a dist_sync job hold the same weights: one checkpoint
                module.save_checkpoint(prefix, epoch + 1, save_optimizer_states=True)
            # validation at the training batch size: the executors are reused, not re-bound
            validation = _validation(module, dataset.val_data, dataset.val_label, args.batch_size)
            val_accuracy[0] = validation["accuracy"]
            if plotter is not None:
                plotter.update(epoch, train=train_metric.get_name_value(), validation=validation)
            reporter.epoch_end(train_metric, validation, epoch)

        try:
            with warnings.catch_warnings():
                # a resumed module has its parameters already: fit's init_params says so and skips
                warnings.filterwarnings("ignore", message="Parameters already initialized")
                module.fit(train_iter, eval_metric=train_metric,
                           batch_end_callback=[progress_bar, reporter.batch_end], epoch_end_callback=epoch_end,
                           kvstore=kvstore, optimizer=args.optimizer,
                           optimizer_params=optimizer_params,
                           initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
                           begin_epoch=begin_epoch, num_epoch=args.epochs)
        except TrainingInterrupted:
            return _interrupted(module, prefix, reporter.position, batches, args.epochs)
    saved = "model saved to" if rank == 0 else "model saved by worker 0 to"
    print(f"validation accuracy {val_accuracy[0]:.4f} after {_count(args.epochs, 'epoch')}; {saved} "
          f"{prefix}-symbol.json and {prefix}-{args.epochs:04d}.params", flush=True)
    if plotter is not None:
        print(f"curves drawn to {plotter.combined_path} (and one file per metric beside it)", flush=True)
    return 0


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mxkit train``."""
    from mxkit.mx.train_networks import NETWORKS

    parser.add_argument("--network", default=DEFAULTS["network"], metavar="|".join(NETWORKS),
                        help="the network (default: %(default)s)")
    parser.add_argument("--data", default=DEFAULTS["data"], metavar="digits|PATH.rec|PATH.csv",
                        help="scikit-learn's digits, a RecordIO file or a CSV with the label first "
                             "(default: %(default)s)")
    parser.add_argument("--drop-nonfinite", action="store_true",
                        help="leave out CSV rows holding NaN or infinite values (default: they are an error "
                             "naming the line and column)")
    parser.add_argument("--epochs", type=int, default=DEFAULTS["epochs"], help="epochs (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"],
                        help="samples per batch, split over the devices (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=DEFAULTS["lr"], help="learning rate (default: %(default)s)")
    parser.add_argument("--optimizer", default=DEFAULTS["optimizer"],
                        help="an mx.optimizer name: sgd (momentum 0.9, wd 1e-4), adam, ... (default: %(default)s)")
    parser.add_argument("--ctx", default=DEFAULTS["ctx"], metavar="cpu:0,cpu:1|gpu:0",
                        help="devices, comma-separated (default: %(default)s)")
    parser.add_argument("--kvstore", default=DEFAULTS["kvstore"],
                        help="how devices (and, under mxkit launch, workers) agree: local, device, dist_sync, "
                             "dist_async, dist_ssp (default: %(default)s)")
    parser.add_argument("--memplan", default=None, help="memory planner (default: config memplan)")
    parser.add_argument("--engine", default=None, help="engine (default: config engine)")
    parser.add_argument("--resume", default=None, metavar="PREFIX",
                        help="continue from the latest checkpoint PREFIX-NNNN.params")
    parser.add_argument("--model-prefix", default=None, metavar="PREFIX",
                        help="where checkpoints go (default: $XDG_CACHE_HOME/mxkit/models/NETWORK-DATA, "
                             "or NETWORK-DATA-runN when an earlier run's checkpoints are there)")
    parser.add_argument("--plot-dir", default=None, metavar="DIR",
                        help="draw the training and validation curves (accuracy and cross-entropy) to "
                             "DIR/all-metrics.png after every epoch "
                             "(needs matplotlib: pip install 'mxkit[plot]')")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="random seed (default: %(default)s)")


__all__ = ["TrainingInterrupted", "add_train_arguments", "default_prefix", "parse_contexts", "run_train"]
