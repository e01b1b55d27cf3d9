"""The ``mxkit`` command line.

``mxkit info``  every registered plugin by kind, and the configuration with sources;
``mxkit train`` the main job: train a network (LeNet on scikit-learn's digits by default);
``mxkit predict PREFIX EPOCH INPUT``  run a saved model;
``mxkit launch -n N -s S -- COMMAND``  a distributed job: KVStore servers on Ray, N workers;
``mxkit convert caffe DEPLOY.prototxt [MODEL.caffemodel] PREFIX``  a Caffe model to MXNet files;
``mxkit demo``  a short tour of what is installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _cmd_info(args: argparse.Namespace) -> int:
    from mxkit.core.info import render_info

    print(render_info())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from mxkit.mx.demo import run_demo

    status: int = run_demo()
    return status


def _cmd_train(args: argparse.Namespace) -> int:
    from mxkit.mx.train_job import run_train

    status: int = run_train(args)
    return status


def _cmd_predict(args: argparse.Namespace) -> int:
    from mxkit.mx.predict_job import run_predict

    status: int = run_predict(args)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mxkit`` (one sub-command per job)."""
    parser = argparse.ArgumentParser(prog="mxkit", description="mxkit: modular deep-learning systems")
    parser.add_argument("--version", action="version", version=f"mxkit {_version()}",
                        help="print the version of mxkit and exit (mxkit info lists every component's)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser("info", help="list plugins and the configuration in force").set_defaults(run=_cmd_info)
    commands.add_parser("demo", help="a short tour of the installed components").set_defaults(run=_cmd_demo)
    from mxkit.mx.predict_job import add_predict_arguments
    from mxkit.mx.train_job import add_train_arguments

    train = commands.add_parser("train", help="train a network (LeNet on scikit-learn's digits by default)")
    add_train_arguments(train)
    train.set_defaults(run=_cmd_train)
    predict = commands.add_parser("predict", help="run a saved model over samples")
    add_predict_arguments(predict)
    predict.set_defaults(run=_cmd_predict)
    from mxkit.mx.cli_convert import add_convert_command
    from mxkit.mx.cli_io import add_io_commands
    from mxkit.mx.cli_launch import add_launch_command
    from mxkit.mx.cli_memplan import add_memplan_command

    add_io_commands(commands)
    add_memplan_command(commands)
    add_launch_command(commands)
    add_convert_command(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mxkit")
    except PackageNotFoundError:  # the facade's source on the path without its distribution
        return "(not installed as a distribution)"


def _stdout_closed() -> int:
    """The reader of our output went away (``mxkit info | head``): stop quietly, as ``cat`` does."""
    import os

    # Python flushes stdout again at exit, which would raise once more: point it at /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in-process)
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mxkit`` console script."""
    args = build_parser().parse_args(argv)
    from mxkit.core.errors import MXKitError

    try:
        result: int = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return result
    except BrokenPipeError:
        return _stdout_closed()
    except MXKitError as exc:
        print(f"mxkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C during `mxkit train`, or one elsewhere
        print("mxkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
