"""``mxkit convert caffe DEPLOY.prototxt [MODEL.caffemodel] PREFIX``: bring a Caffe model over.

``build_parser`` in ``mxkit/mx/cli.py`` calls :func:`add_convert_command`; mxkit-caffe is
imported only when the command runs, and a missing one is reported with how to install it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from mxkit.core.errors import FormatError, MissingComponentError, MXKitError


def _caffe() -> Any:
    import importlib

    try:
        return importlib.import_module("mxkit.caffe")
    except ModuleNotFoundError as exc:
        if exc.name not in ("mxkit.caffe", "google", "google.protobuf"):
            raise
        raise MissingComponentError(
            "`mxkit convert caffe` needs mxkit-caffe, which is not installed; install it with "
            "`pip install mxkit-caffe`") from None


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=D1,D2,... (for example data=1,3,224,224)")
    return name, shape


def _cmd_convert_caffe(args: argparse.Namespace) -> int:
    caffe = _caffe()
    if len(args.files) not in (2, 3):
        raise FormatError(f"expected DEPLOY.prototxt [MODEL.caffemodel] PREFIX, got {len(args.files)} paths")
    prototxt, *model, prefix = args.files
    folder = os.path.dirname(prefix) or "."
    if not os.path.isdir(folder):
        raise MXKitError(f"the folder of PREFIX {prefix!r}, {folder!r}, does not exist; create it first")
    shapes = dict(args.input_shape or [])
    # everything is read and checked before the first file is written
    mean = caffe.convert_mean(args.mean, bgr_to_rgb=not args.bgr) if args.mean else None
    if model:
        caffe.convert_model(prototxt, model[0], prefix, bgr_to_rgb=not args.bgr, input_shapes=shapes)
        print(f"wrote {prefix}-symbol.json and {prefix}-0000.params")
    else:
        symbol, _ = caffe.convert_symbol(prototxt, input_shapes=shapes)
        symbol.save(f"{prefix}-symbol.json")
        print(f"wrote {prefix}-symbol.json")
    if mean is not None:
        import mxkit.ndarray as nd

        nd.save(f"{prefix}-mean.nd", {"mean_image": mean})
        print(f"wrote {prefix}-mean.nd (mean_image, shape {tuple(mean.shape)})")
    return 0


def add_convert_command(subparsers: Any) -> None:
    """Add ``convert caffe`` to the ``mxkit`` sub-commands."""
    convert = subparsers.add_parser("convert", help="convert models of other frameworks to mxkit/MXNet files")
    formats = convert.add_subparsers(dest="convert_format", metavar="FORMAT", required=True)
    caffe = formats.add_parser(
        "caffe", help="Caffe: DEPLOY.prototxt [MODEL.caffemodel] PREFIX -> PREFIX-symbol.json, PREFIX-0000.params",
        description="Convert a Caffe network (and its weights) to PREFIX-symbol.json (and PREFIX-0000.params). "
                    "The converted model takes RGB input unless --bgr is given.")
    caffe.add_argument("files", nargs="+", metavar="FILE", help="DEPLOY.prototxt [MODEL.caffemodel] PREFIX")
    caffe.add_argument("--mean", metavar="MEAN.binaryproto", help="also convert this mean image to PREFIX-mean.nd")
    caffe.add_argument("--bgr", action="store_true",
                       help="keep Caffe's BGR channel order (default: swap to RGB in the first convolutions and "
                            "the mean)")
    caffe.add_argument("--input-shape", type=_input_shape, action="append", metavar="NAME=D1,D2,...",
                       help="shape of an input the prototxt gives none for (a Data layer's tops); repeatable")
    caffe.set_defaults(run=_cmd_convert_caffe)
