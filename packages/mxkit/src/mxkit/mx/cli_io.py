"""The IO sub-commands of ``mxkit``: ``rec verify``, ``rec index`` and ``im2rec``.

``build_parser`` in ``mxkit/mx/cli.py`` calls :func:`add_io_commands`; the commands import
mxkit-io only when they run, and say how to install it when it is missing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mxkit.core.errors import MissingComponentError


def _io_module(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"mxkit.io.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("mxkit.io", f"mxkit.io.{name}"):
            raise
        raise MissingComponentError(
            "this command needs mxkit-io, which is not installed; install it with `pip install mxkit-io`"
        ) from None


def _cmd_rec_verify(args: argparse.Namespace) -> int:
    verify = _io_module("verify")
    report = verify.verify_record_file(args.file, args.idx)
    for problem in report.problems:
        where = f"offset {problem.offset}" if problem.offset >= 0 else "index"
        print(f"{args.file}: {where}: {problem.reason}")
    status = "OK" if report.ok else f"CORRUPT ({len(report.problems)} problems)"
    print(f"{args.file}: {report.records} intact records, {report.size} bytes: {status}")
    return 0 if report.ok else 1


def _cmd_rec_index(args: argparse.Namespace) -> int:
    verify = _io_module("verify")
    idx_path = args.idx or ((args.file[:-4] if args.file.endswith(".rec") else args.file) + ".idx")
    written, problems = verify.rebuild_index(args.file, idx_path, key=args.key)
    for problem in problems:
        print(f"{args.file}: skipped damaged data at offset {problem.offset}: {problem.reason}", file=sys.stderr)
    print(f"wrote {written} entries to {idx_path}")
    return 0 if not problems else 1


def _cmd_im2rec(args: argparse.Namespace) -> int:
    im2rec = _io_module("im2rec")
    if args.list:
        for path in im2rec.make_list(
            args.prefix, args.root, recursive=args.recursive, exts=args.exts, train_ratio=args.train_ratio,
            test_ratio=args.test_ratio, shuffle=args.shuffle, chunks=args.chunks,
        ):
            print(f"wrote {path}")
        return 0
    options = im2rec.PackOptions(
        root=args.root, pass_through=args.pass_through, resize=args.resize, center_crop=args.center_crop,
        quality=args.quality, color=args.color, encoding=args.encoding, pack_label=args.pack_label,
    )
    skipped_total = 0
    for list_path in im2rec.find_list_files(args.prefix):
        progress = sys.stderr if args.progress and sys.stderr.isatty() else None
        written, skipped = im2rec.pack_list(list_path, options, num_workers=args.num_thread, progress=progress)
        skipped_total += skipped
        base = list_path[:-4]
        print(f"{list_path}: wrote {written} records to {base}.rec ({skipped} skipped)")
    return 0 if skipped_total == 0 else 1


def add_io_commands(subparsers: Any) -> None:
    """Add ``rec`` (``verify``, ``index``) and ``im2rec`` to the ``mxkit`` sub-commands."""
    rec = subparsers.add_parser("rec", help="check and index RecordIO files")
    rec_commands = rec.add_subparsers(dest="rec_command", metavar="ACTION", required=True)
    verify = rec_commands.add_parser("verify", help="read every record; list damaged ones with their offsets")
    verify.add_argument("file", help="the .rec file")
    verify.add_argument("--idx", help="index to check too (default: FILE with .idx, when it exists)")
    verify.set_defaults(run=_cmd_rec_verify)
    index = rec_commands.add_parser("index", help="rebuild a lost or broken .idx")
    index.add_argument("file", help="the .rec file")
    index.add_argument("--idx", help="where to write the index (default: FILE with .idx)")
    index.add_argument("--key", choices=("id", "position"), default="id",
                       help="key of each record: its IRHeader id (im2rec files) or its position")
    index.set_defaults(run=_cmd_rec_index)

    tool = subparsers.add_parser("im2rec", help="make image lists and pack them into .rec/.idx (MXNet's im2rec)")
    tool.add_argument("prefix", help="prefix of the .lst/.rec files (or one .lst file when packing)")
    tool.add_argument("root", help="folder holding the images")
    lists = tool.add_argument_group("making lists")
    lists.add_argument("--list", action="store_true", help="write .lst files instead of packing")
    lists.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"], help="image file extensions")
    lists.add_argument("--chunks", type=int, default=1, help="number of list chunks")
    lists.add_argument("--train-ratio", type=float, default=1.0, help="fraction of images for training")
    lists.add_argument("--test-ratio", type=float, default=0.0, help="fraction of images for testing")
    lists.add_argument("--recursive", action="store_true", help="one class per sub-folder")
    lists.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="keep the sorted order")
    packing = tool.add_argument_group("packing records")
    packing.add_argument("--pass-through", action="store_true", help="store the image files' bytes as they are")
    packing.add_argument("--resize", type=int, default=0, help="resize the shorter edge to this many pixels")
    packing.add_argument("--center-crop", action="store_true", help="crop the central square first")
    packing.add_argument("--quality", type=int, default=95, help="JPEG quality 0-100 or PNG compression 0-9")
    packing.add_argument("--num-thread", type=int, default=1, help="encoding processes")
    packing.add_argument("--color", type=int, default=1, choices=(-1, 0, 1),
                         help="1: color, 0: grayscale, -1: as stored")
    packing.add_argument("--encoding", default=".jpg", choices=(".jpg", ".png"), help="encoding of the images")
    packing.add_argument("--pack-label", action="store_true", help="store every label column of the list")
    packing.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    tool.set_defaults(run=_cmd_im2rec)
