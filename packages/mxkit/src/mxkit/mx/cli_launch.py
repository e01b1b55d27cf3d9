"""``mxkit launch -n WORKERS -s SERVERS [--address auto|HOST:PORT] -- COMMAND...``."""

from __future__ import annotations

import argparse
import signal
from typing import Any

from mxkit.core.errors import ConfigError


def add_launch_command(subparsers: Any) -> None:
    """Add ``launch`` to the ``mxkit`` sub-commands."""
    parser = subparsers.add_parser(
        "launch", help="run a distributed job: KVStore servers on Ray and WORKERS copies of a command",
        description="Start the KVStore servers of a new job on Ray (a running cluster, or a local one bound to "
                    "127.0.0.1), run the command once per worker with MXKIT_RANK and MXKIT_NUM_WORKERS set, "
                    "print each worker's output prefixed with its rank, and tear everything down at the end.")
    parser.add_argument("-n", "--num-workers", type=int, required=True, help="how many workers run the command")
    parser.add_argument("-s", "--num-servers", type=int, default=1, help="KVStore servers (default: %(default)s)")
    parser.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                        help="a running Ray cluster to use (default: start a local one on 127.0.0.1)")
    parser.add_argument("--placement", default="local", choices=("local", "spread"),
                        help="workers as local processes, or as Ray tasks spread over the cluster's nodes "
                             "(default: %(default)s)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra environment variable for every worker (repeatable)")
    parser.add_argument("--allow-remote-code", action="store_true",
                        help="let workers install a Python function on the servers with kv.set_updater "
                             "(it runs there; default: the servers refuse it)")
    parser.add_argument("--verbose", action="store_true",
                        help="show Ray's own log lines on the console (default: they go to a file under "
                             "$XDG_CACHE_HOME/mxkit/logs, named when the job starts)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the worker command, after '--'")
    parser.set_defaults(run=run_launch)


def parse_env(items: list[str]) -> dict[str, str]:
    """``["A=1", "B=x"]`` as a dict; a malformed item is a :class:`ConfigError`."""
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not name.replace("_", "a").isalnum():
            raise ConfigError(f"--env {item!r}: write NAME=VALUE with a variable name of letters, digits and _")
        env[name] = value
    return env


def run_launch(args: argparse.Namespace) -> int:
    """Run the job; its exit status is the launcher's."""
    from mxkit.mx.launch import LaunchSpec, launch

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    spec = LaunchSpec(command=command, num_workers=args.num_workers, num_servers=args.num_servers,
                      address=args.address, placement=args.placement, extra_env=parse_env(args.env),
                      allow_remote_code=args.allow_remote_code,
                      ray_log=None if args.verbose else _ray_log_path())
    # `kill` of the launcher tears the job down like Ctrl-C does
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        status: int = launch(spec)
        return status
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ray_log_path() -> str:
    import os
    import time

    from mxkit.mx.train_data import cache_directory

    return os.path.join(str(cache_directory()), "logs", f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
