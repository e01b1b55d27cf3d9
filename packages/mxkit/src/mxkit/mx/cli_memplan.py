"""``mxkit memplan``: how much memory a saved network needs under each planning strategy."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from mxkit.core.errors import ConfigError


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``data=1,3,224,224`` as ``("data", (1, 3, 224, 224))``."""
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        shape = ()
    if not sep or not name.strip() or not shape or any(d <= 0 for d in shape):
        raise ConfigError(f"--shape {text!r}: write an input name and its positive dimensions, like data=1,3,224,224")
    return name.strip(), shape


def add_memplan_command(subparsers: Any) -> None:
    """Add ``memplan`` to the ``mxkit`` sub-commands."""
    parser = subparsers.add_parser("memplan", help="memory of a saved network under each planning strategy")
    parser.add_argument("symbol", help="the network's JSON file (PREFIX-symbol.json)")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="an input's shape (repeat for several inputs)")
    parser.add_argument("--train", action="store_true", help="plan training (forward and backward), not prediction")
    parser.add_argument("--strategy", action="append", metavar="NAME",
                        help="only these strategies (default: every registered one)")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="also draw live bytes over the execution steps with each strategy's arena as a line "
                             "(needs matplotlib: pip install 'mxkit[plot]')")
    parser.set_defaults(run=run_memplan)


def run_memplan(args: argparse.Namespace) -> int:
    """Plan the network with each strategy and print bytes, the ratio to the lower bound and the time.

    Every argument is checked and every plan made before anything is printed, so an error is
    the only output of a failed run. One lower bound serves every row and the picture: the
    peak of live bytes in the network's execution order when nothing is recomputed. A
    strategy that recomputes (``mirror``, ``sublinear``) runs a longer graph and can go below
    it; its row says so.
    """
    from mxkit.core import plugins
    from mxkit.symbol import load

    if not args.shape:
        raise ConfigError("mxkit memplan needs the input shapes, e.g. --shape data=1,3,224,224")
    shapes = dict(parse_shape(text) for text in args.shape)
    if args.plot is not None:
        check_plot_path(args.plot)
    symbol = load(args.symbol)
    check_input_names(symbol, shapes, args.symbol)
    names = args.strategy or [n for n in plugins.registry("planner").names() if n != "auto"]
    plans = [_plan(symbol, shapes, args.train, name) for name in names]
    reference = next((plan for plan in plans if not plan.recompute), None)
    if reference is None:  # only recomputing strategies were asked for: bound the plain graph anyway
        reference = _plan(symbol, shapes, args.train, "greedy")
    lower = reference.lower_bound_bytes

    mode = "training" if args.train else "prediction"
    print(f"{args.symbol}: {mode} with {', '.join(f'{k}={v}' for k, v in shapes.items())}")
    print(f"{'strategy':<16}{'MiB':>12}{'x lower bound':>15}{'planning ms':>13}")
    for plan in plans:
        note = f"  recomputes {len(plan.recompute)} nodes" if plan.recompute else ""
        print(f"{plan.strategy:<16}{plan.total_bytes / 2**20:>12,.1f}{plan.total_bytes / max(lower, 1):>15.2f}"
              f"{plan.planning_seconds * 1e3:>13.1f}{note}")
    print(f"{'lower bound':<16}{lower / 2**20:>12,.1f}{1.0:>15.2f}  peak of live bytes in execution order, "
          f"nothing recomputed")
    if args.plot is not None and plans:
        write_plan_picture(plans, args.plot, graph_of=lambda plan: _memory_graph(symbol, shapes, args.train, plan),
                           title=f"{os.path.basename(args.symbol)}: {mode}, "
                                                   f"{', '.join(f'{k}={v}' for k, v in shapes.items())}")
        print(f"plot written to {args.plot}")
    return 0


def _plan(symbol: Any, shapes: dict[str, tuple[int, ...]], train: bool, name: str) -> Any:
    from mxkit.core.errors import ShapeError

    try:
        plan = symbol.plan_memory(for_training=train, memplan=name, **shapes)
    except ShapeError as exc:
        given = " ".join(f"--shape {k}={','.join(map(str, v))}" for k, v in shapes.items())
        raise ConfigError(f"the shapes {given} do not fit the network: {exc}") from None
    # a plugin may reuse another's planner: label the line with the name that was asked for
    return plan if plan.strategy == name else dataclasses.replace(plan, strategy=name)


def data_inputs(symbol: Any) -> list[str]:
    """The arguments of ``symbol`` that need a ``--shape``: those whose shape inference cannot
    derive from the others (its data and label inputs, not its weights)."""
    arguments = symbol.list_arguments()
    learnable = ("_weight", "_bias", "_gamma", "_beta", "_running_mean", "_running_var", "_moving_mean",
                 "_moving_var", "_parameters", "_i2h_weight", "_h2h_weight")
    return [name for name in arguments if not name.endswith(learnable)]


def check_input_names(symbol: Any, shapes: dict[str, tuple[int, ...]], path: str) -> None:
    """Refuse a ``--shape`` naming no input, and say which inputs still lack one."""
    arguments = set(symbol.list_arguments())
    inputs = data_inputs(symbol)
    for name in shapes:
        if name not in arguments:
            raise ConfigError(f"--shape {name}=...: {os.path.basename(path)} has no input named {name!r}; its inputs "
                              f"are {', '.join(inputs) or 'none'} (e.g. --shape {inputs[0] if inputs else 'data'}="
                              f"N,...)")
    missing = [name for name in inputs if name not in shapes and not name.endswith("_label")]
    if missing:
        raise ConfigError(f"{os.path.basename(path)} also needs the shape of {', '.join(missing)}: add "
                          + " ".join(f"--shape {name}=D1,D2,..." for name in missing))


def check_plot_path(path: str) -> None:
    """Refuse a ``--plot`` path that cannot become a PNG, or a missing matplotlib, before planning."""
    from mxkit.core.plotting import matplotlib_figure

    if not path.lower().endswith(".png"):
        raise ConfigError(f"--plot {path!r}: the picture is a PNG; give a file name ending in .png")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"--plot {path!r}: the folder {folder!r} does not exist; create it or pick another path")
    matplotlib_figure("mxkit memplan --plot", extra="mxkit[plot]")


def _memory_graph(symbol: Any, shapes: dict[str, tuple[int, ...]], train: bool, plan: Any) -> Any:
    """The memplan graph ``plan`` was made from (the same build ``symbol.plan_memory`` does)."""
    from mxkit.symbol.exec_graph import build_exec_graph

    return build_exec_graph(symbol, shapes, {}, "write", for_training=train, memplan=plan.strategy).memory_graph()


def write_plan_picture(plans: list[Any], path: str, title: str = "", graph_of: Any = None) -> None:
    """Draw every plan's arena against the live bytes of the first plan that recomputes nothing.

    ``graph_of(plan)``, when given, returns that plan's memplan graph, whose node names then
    label the steps (and the peak).
    """
    # a recomputing strategy plans a longer graph; the reference curve is the plain one
    first = next((i for i, p in enumerate(plans) if not p.recompute), 0)
    reference, others = plans[first], plans[:first] + plans[first + 1:]
    graph = graph_of(reference) if graph_of is not None else None
    if graph is not None and graph.num_steps != len(reference.live_bytes):
        graph = None  # a plugin planner that rewrote the graph: draw without step names
    ax = reference.plot(graph=graph, compare=others)
    if title:
        ax.set_title(title, fontsize=10)
    from mxkit.core.files import atomic_open

    image_format = os.path.splitext(str(path))[1].lstrip(".").lower() or "png"
    with atomic_open(path, "wb") as handle:  # a failed or killed draw leaves the old picture
        ax.figure.savefig(handle, dpi=100, format=image_format)
