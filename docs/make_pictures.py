"""Draw the pictures of the user guide from real runs (``nox -s docs`` runs this first).

    python docs/make_pictures.py [--out docs/_generated]

Everything goes to ``docs/_generated`` (ignored by git, so a docs build never changes a
tracked file): the PNG files, and ``figures.json``, the numbers the guide's prose quotes
(``{{ name }}`` substitutions that docs/conf.py loads), so that text and picture come from
the same run.

- ``memplan-resnet.png``: the training memory of ``mxkit train``'s ResNet at batch 64 on
  32x32 images, live bytes per step against every strategy's arena (``MemoryPlan.plot``);
- ``train-accuracy.png``: ``mxkit train --network mlp --plot-dir`` on the digits bundled
  with scikit-learn (no download);
- ``network-buffers.png``: LeNet drawn by ``mx.viz.plot_network(memplan="mxnet")``, only
  when Graphviz (the Python package and the ``dot`` program) is installed; the guide does
  not embed it, so the docs build without Graphviz.

Everything is seeded, so a rerun redraws the same numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

STRATEGIES = ("none", "inplace", "coshare", "mxnet", "greedy", "sublinear")
OUT = Path(__file__).parent / "_generated"
FIGURES: dict[str, str] = {}  # the numbers the guide quotes, written to figures.json


def memory_picture(out: Path) -> Path:
    from mxkit.mx.train_networks import build_network
    from mxkit.symbol.exec_graph import build_exec_graph

    net = build_network("resnet", (3, 32, 32), 10)
    shapes = {"data": (64, 3, 32, 32)}
    plans = [net.plan_memory(for_training=True, memplan=name, **shapes) for name in STRATEGIES]
    # the mxnet plan's own graph names the steps (the peak's note)
    graph = build_exec_graph(net, shapes, {}, "write", for_training=True, memplan="mxnet").memory_graph()
    reference = plans[STRATEGIES.index("mxnet")]
    ax = reference.plot(graph=graph, compare=[p for p in plans if p is not reference])
    ax.set_title("mxkit train's ResNet, training at batch 64 on 3x32x32 images", fontsize=10)
    path = out / "memplan-resnet.png"
    ax.figure.savefig(path, dpi=80)
    bound = reference.lower_bound_bytes
    FIGURES.update(
        memplan_mxnet_above_bound=f"{round(100 * (reference.total_bytes / bound - 1))}%",
        memplan_greedy_ratio=f"{plans[STRATEGIES.index('greedy')].total_bytes / bound:.2f}",
        memplan_sublinear_ratio=f"{plans[STRATEGIES.index('sublinear')].total_bytes / bound:.2f}",
    )
    return path


def training_curves(out: Path) -> Path:
    from mxkit.mx.cli import main

    with tempfile.TemporaryDirectory() as work:
        # a private cache: the digits are packed there, nothing of the user's is touched
        os.environ["XDG_CACHE_HOME"] = os.path.join(work, "cache")
        curves = os.path.join(work, "curves")
        code = main(["train", "--network", "mlp", "--epochs", "8", "--seed", "0", "--model-prefix",
                     os.path.join(work, "model", "mlp"), "--plot-dir", curves])
        if code != 0:
            raise SystemExit(f"mxkit train failed with exit code {code}")
        path = out / "train-accuracy.png"
        shutil.copyfile(os.path.join(curves, "all-metrics.png"), path)
    return path


def network_picture(out: Path) -> Path | None:
    try:
        import graphviz
    except ImportError:
        return None
    if shutil.which("dot") is None:
        return None
    from mxkit import mx
    from mxkit.mx.train_networks import build_network

    net = build_network("lenet", (1, 8, 8), 10)
    dot = mx.viz.plot_network(net, shape={"data": (32, 1, 8, 8)}, memplan="mxnet", save_format="png")
    try:
        rendered = dot.render(str(out / "network-buffers"), cleanup=True)
    except graphviz.ExecutableNotFound:
        return None
    return Path(rendered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT,
                        help="folder for the PNG files (default: %(default)s)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for draw in (memory_picture, training_curves, network_picture):
        path = draw(args.out)
        if path is None:
            print(f"{draw.__name__}: skipped (Graphviz is not installed)", file=sys.stderr)
        else:
            print(f"{path} ({path.stat().st_size // 1024} KiB)")
    (args.out / "figures.json").write_text(json.dumps(FIGURES, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
