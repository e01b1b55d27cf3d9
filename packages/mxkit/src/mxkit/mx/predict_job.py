"""``mxkit predict PREFIX EPOCH INPUT``: run a saved model over samples and print its classes.

INPUT is ``digits`` (the validation digits ``mxkit train`` holds out), a ``.rec``, a ``.csv``
(label first) or a ``.npy`` of samples (no labels). With labels, the accuracy is printed too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError, ShapeError

_SHOWN = 10


def _read_input(spec: str) -> tuple[Any, Any]:
    from mxkit.mx.train_data import pack_digits, read_csv, read_records

    samples: tuple[Any, Any]
    if spec == "digits":
        samples = read_records(pack_digits()[1])
        return samples
    path = Path(spec)
    if not path.exists():
        raise ConfigError(f"INPUT {spec!r}: no such file (give digits, a .rec, a .csv or a .npy)")
    if path.suffix in (".rec", ".csv"):
        samples = read_records(path) if path.suffix == ".rec" else read_csv(path)
        return samples
    if path.suffix == ".npy":
        data = np.load(path, allow_pickle=False).astype(np.float32)
        if data.ndim < 2:
            raise ShapeError(f"INPUT {spec!r} holds an array of shape {data.shape}; it needs samples along axis 0")
        return data, None
    raise ConfigError(f"INPUT must be digits, a .rec, a .csv or a .npy file, got {spec!r}")


def predict_classes(prefix: str, epoch: int, data: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """Class probabilities of ``data`` under the checkpoint ``prefix``/``epoch``.

    Raises
    ------
    ShapeError
        When the samples' shape does not fit the model.
    """
    import mxkit.mx as mx

    module = mx.mod.Module.load(prefix, epoch, context=mx.cpu())
    batch = min(batch_size, len(data))
    iterator = mx.io.NDArrayIter(data, np.zeros(len(data), dtype=np.float32), batch)
    try:
        module.bind(data_shapes=iterator.provide_data, label_shapes=iterator.provide_label, for_training=False)
    except ShapeError as exc:
        raise ShapeError(f"samples of shape {tuple(data.shape[1:])} do not fit the model {prefix!r}: {exc}") from None
    probabilities: np.ndarray = module.predict(iterator).asnumpy()
    return probabilities


def run_predict(args: argparse.Namespace) -> int:
    """Run ``mxkit predict``."""
    data, labels = _read_input(args.input)
    probabilities = predict_classes(args.prefix, args.epoch, data)
    classes = probabilities.argmax(axis=1)
    for index in range(min(_SHOWN, len(classes))):
        truth = "" if labels is None else f"  (label {int(labels[index])})"
        print(f"sample {index}: class {classes[index]}  p={probabilities[index, classes[index]]:.3f}{truth}")
    if len(classes) > _SHOWN:
        print(f"... {len(classes) - _SHOWN} more")
    summary = f"{len(classes)} samples"
    if labels is not None:
        summary += f"; accuracy {float((classes == labels.astype(np.int64)).mean()):.4f}"
    print(summary)
    if args.output:
        from mxkit.core.files import atomic_open

        with atomic_open(args.output, "wb") as handle:
            np.savetxt(handle, np.column_stack([classes, probabilities.max(axis=1)]), fmt=["%d", "%.6f"],
                       delimiter=",", header="class,probability", comments="")
        print(f"predictions written to {args.output}")
    return 0


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``mxkit predict``."""
    parser.add_argument("prefix", metavar="PREFIX", help="checkpoint prefix (the path before -symbol.json)")
    parser.add_argument("epoch", metavar="EPOCH", type=int, help="checkpoint epoch (the NNNN of PREFIX-NNNN.params)")
    parser.add_argument("input", metavar="INPUT", help="digits, a .rec, a .csv (label first) or a .npy of samples")
    parser.add_argument("--output", default=None, metavar="FILE.csv", help="write every prediction to a CSV")




__all__ = ["add_predict_arguments", "predict_classes", "run_predict"]
