"""Export MXNet 1.9.1's Gluon model-zoo networks and measure MXNet's own memory plan for them.

Run with an MXNet 1.9.1 interpreter, from any folder:

    MXNET_SUBGRAPH_BACKEND=NONE python benchmarks/zoo/export_zoo.py

For each network it writes ``<name>-symbol.json`` next to this script (the graph only: the
weights are random and not needed to plan memory), then binds the graph with MXNet's
``simple_bind`` in three settings (training at batch 128 with a ``SoftmaxOutput`` head,
prediction at batch 128, prediction at batch 1) and records the ``Total N MB allocated`` line of
``debug_str()`` (MXNet's planned intermediates, in MiB) in ``mxnet_memory.json``. Each
bind runs in its own process, so one setting's pool never counts in another's. Binding
only reserves memory: nothing is run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Gluon model-zoo name -> input side (Inception-v3 takes 299x299)
NETWORKS = {"alexnet": 224, "vgg16": 224, "resnet50_v1": 224, "resnet152_v1": 224, "inceptionv3": 299,
            "mobilenet1.0": 224, "densenet121": 224}
#: (setting, batch, training)
SETTINGS = (("train", 128, True), ("predict", 128, False), ("predict", 1, False))


def export(name: str, side: int) -> None:
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision

    net = vision.get_model(name, classes=1000)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.zeros((1, 3, side, side)))
    prefix = str(HERE / name)
    net.export(prefix)
    os.remove(prefix + "-0000.params")


def measure(name: str, side: int, batch: int, training: bool) -> int:
    import mxnet as mx

    net = mx.sym.load(str(HERE / f"{name}-symbol.json"))
    shapes = {"data": (batch, 3, side, side)}
    if training:
        net = mx.sym.SoftmaxOutput(net, name="softmax")
        shapes["softmax_label"] = (batch,)
    executor = net.simple_bind(mx.cpu(), grad_req="write" if training else "null", **shapes)
    found = re.search(r"Total (\d+) MB allocated", executor.debug_str())
    assert found, "debug_str() has no 'Total N MB allocated' line"
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1:  # one measurement, in a process of its own
        name, side, batch, training = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
        print(measure(name, side, batch, training))
        return
    if os.environ.get("MXNET_SUBGRAPH_BACKEND") != "NONE":
        sys.exit("set MXNET_SUBGRAPH_BACKEND=NONE: MXNet's fused subgraphs would change the graph being planned")
    import mxnet as mx

    table = {"mxnet": mx.__version__, "command": "MXNET_SUBGRAPH_BACKEND=NONE python benchmarks/zoo/export_zoo.py",
             "unit": "MiB (debug_str's Total N MB allocated: the planned intermediates)", "networks": {}}
    for name, side in NETWORKS.items():
        export(name, side)
        rows = {}
        for setting, batch, training in SETTINGS:
            done = subprocess.run([sys.executable, __file__, name, str(side), str(batch), "1" if training else "0"],
                                  capture_output=True, text=True, check=True)
            rows[f"{setting}_{batch}"] = int(done.stdout.split()[-1])
            print(name, setting, batch, rows[f"{setting}_{batch}"], "MB", flush=True)
        table["networks"][name] = {"input": [3, side, side], **rows}
    (HERE / "mxnet_memory.json").write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
