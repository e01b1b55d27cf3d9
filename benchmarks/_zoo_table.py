"""The model-zoo memory table of benchmarks/memory_zoo.py: seven Gluon networks, three settings.

The graphs are MXNet 1.9.1's Gluon model zoo as exported by MXNet itself
(benchmarks/zoo/export_zoo.py wrote ``zoo/<name>-symbol.json``). Each is planned without
allocating (``Symbol.plan_memory``) for training at batch 128 with a ``SoftmaxOutput`` head,
prediction at batch 128 and prediction at batch 1, with every strategy; the figures are the
planned intermediates in MiB, which is what MXNet's ``debug_str()`` reports as ``Total N MB
allocated``. MXNet's figure is measured in the same run when ``MXKIT_BENCH_MXNET_PYTHON``
names an MXNet 1.9.1 interpreter, otherwise read from zoo/mxnet_memory.json (written by the
same script).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

ZOO = Path(__file__).with_name("zoo")
SETTINGS = (("train", 128, True), ("predict", 128, False), ("predict", 1, False))
STRATEGIES = ("none", "inplace", "coshare", "mxnet", "greedy", "auto")
DEFAULT = "auto"
LABELS = {"alexnet": "AlexNet", "vgg16": "VGG-16", "resnet50_v1": "ResNet-50", "resnet152_v1": "ResNet-152",
          "inceptionv3": "Inception-v3", "mobilenet1.0": "MobileNet-1.0", "densenet121": "DenseNet-121"}


def mxnet_figures(committed: dict, python: str | None) -> tuple[dict, str]:
    """MXNet's MiB per (network, setting key), and where they came from."""
    if not python:
        return committed["networks"], f"committed table ({committed['command']})"
    figures = {}
    env = {**os.environ, "MXNET_SUBGRAPH_BACKEND": "NONE"}
    for name, row in committed["networks"].items():
        side = row["input"][-1]
        figures[name] = {}
        for setting, batch, training in SETTINGS:
            done = subprocess.run([python, str(ZOO / "export_zoo.py"), name, str(side), str(batch),
                                   "1" if training else "0"], capture_output=True, text=True, env=env, check=False)
            words = done.stdout.split()
            figures[name][f"{setting}_{batch}"] = int(words[-1]) if done.returncode == 0 and words else None
    return figures, "measured in this run"


def zoo_table(python: str | None, names: list[str] | None = None) -> dict:
    """Print the table; return ``{(network, setting): {strategy: MiB, 'lower': MiB, 'mxnet': MiB}}``."""
    from mxkit import symbol as sym

    committed = json.loads((ZOO / "mxnet_memory.json").read_text())
    figures, source = mxnet_figures(committed, python)
    print(f"Model-zoo memory: planned intermediates in MiB (MXNet 1.9.1: debug_str's Total, {source})")
    header = (f"{'network':<14}{'setting':<13}" + "".join(f"{s:>9}" for s in STRATEGIES) +
              f"{'lower':>9}{'MXNet':>9}{'auto/MXNet':>11}{'greedy/lb':>10}{'none/auto':>10}{'plan s':>8}")
    print(header)
    print("-" * len(header))
    results = {}
    for name in names or list(LABELS):
        net = sym.load(str(ZOO / f"{name}-symbol.json"))
        side = committed["networks"][name]["input"][-1]
        for setting, batch, training in SETTINGS:
            shapes = {"data": (batch, 3, side, side)}
            graph = net
            if training:
                graph = sym.SoftmaxOutput(net, name="softmax")
                shapes["softmax_label"] = (batch,)
            row = {}
            started = time.perf_counter()
            for strategy in STRATEGIES:
                plan = graph.plan_memory(for_training=training, memplan=strategy, **shapes)
                row[strategy] = plan.total_bytes / 2**20
                row["lower"] = plan.lower_bound_bytes / 2**20
            seconds = (time.perf_counter() - started) / len(STRATEGIES)
            theirs = figures.get(name, {}).get(f"{setting}_{batch}")
            row["mxnet"] = theirs
            results[(name, f"{setting} b{batch}")] = row
            versus = f"{row[DEFAULT] / theirs:.2f}" if theirs else "-"
            print(f"{LABELS[name]:<14}{f'{setting} b{batch}':<13}" +
                  "".join(f"{row[s]:>9,.0f}" for s in STRATEGIES) +
                  f"{row['lower']:>9,.0f}{theirs if theirs is not None else '-':>9}{versus:>11}"
                  f"{row['greedy'] / row['lower']:>10.3f}{row['none'] / row[DEFAULT]:>10.1f}{seconds:>8.2f}")
    _summary(results)
    return results


def _summary(results: dict) -> None:
    at_or_below = sum(1 for row in results.values() if row["mxnet"] and row[DEFAULT] <= row["mxnet"] + 1)
    compared = sum(1 for row in results.values() if row["mxnet"])
    greedy_ok = sum(1 for row in results.values() if row["greedy"] <= 1.05 * row["lower"])
    train = [row["none"] / row[DEFAULT] for (_, setting), row in results.items() if setting.startswith("train")]
    predict = [row["none"] / row[DEFAULT] for (_, setting), row in results.items() if setting.startswith("predict")]
    print(f"targets: auto at or below MXNet on {at_or_below}/{compared} rows (MXNet rounds down to whole MB); "
          f"greedy within 5% of the lower bound on {greedy_ok}/{len(results)}; reduction from none: training "
          f"{min(train):.1f}-{max(train):.1f}x (target 2x), prediction {min(predict):.1f}-{max(predict):.1f}x "
          f"(target 4x)")
