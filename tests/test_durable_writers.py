"""Every writer of a user file replaces it durably: with the disk full, or killed in the
middle of a write, the previous file survives and loads; the next save cleans up."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from mxkit import mx
from mxkit.core import files

SIZE_LIMIT = 16 * 1024  # RLIMIT_FSIZE of the "disk full" writer: every version 2 is larger


def _symbol(version):
    # a long name makes version 2's JSON larger than the limit
    return mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc" + "v" * 40_000 * (version - 1))


def save_symbol(path, version):
    _symbol(version).save(str(path))


def load_symbol(path):
    return 1 + len(mx.sym.load(str(path)).list_arguments()[1]) // 40_000


def save_params(path, version):
    mx.nd.save(str(path), {"w": mx.nd.full((10_000 * version,), version)})


def load_params(path):
    return int(mx.nd.load(str(path))["w"].asnumpy()[0])


def save_records(path, version):
    with mx.recordio.MXIndexedRecordIO(str(path) + ".idx", str(path), "w") as writer:
        for key in range(version):
            writer.write_idx(key, bytes([version]) * 20_000 * version)


def load_records(path):
    reader = mx.recordio.MXIndexedRecordIO(str(path) + ".idx", str(path), "r")
    try:
        assert len(reader.keys) == reader.read_idx(0)[0]  # index and records of one version
        return reader.read_idx(0)[0]
    finally:
        reader.close()


def _module(version):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=500 * version, name="fc")
    module = mx.mod.Module(mx.sym.sum(net), data_names=["data"], label_names=None)
    module.bind(data_shapes=[("data", (1, 8))])
    module.init_params(mx.init.Constant(version))
    module.init_optimizer(optimizer="sgd", optimizer_params={"momentum": 0.9})
    module.forward_backward(mx.io.DataBatch([mx.nd.ones((1, 8))], None))
    module.update()
    return module


def save_states(path, version):
    _module(version).save_optimizer_states(str(path))


def load_states(path):
    module = _module(1)
    module.load_optimizer_states(str(path))
    with np.load(str(path), allow_pickle=False) as archive:  # an npz: the momentum of fc_weight
        return max(archive[name].size for name in archive.files if archive[name].dtype == np.float32) // 8 // 500


def save_checkpoint(path, version):
    params = {"fc_weight": mx.nd.full((2, 8), version), "fc_bias": mx.nd.zeros((2,)),
              "pad": mx.nd.zeros((10_000 * (version - 1) + 1,))}
    mx.model.save_checkpoint(str(path), 1, _symbol(version), params, {})


def load_checkpoint(path):
    symbol, args, _ = mx.model.load_checkpoint(str(path), 1)
    version = int(args["fc_weight"].asnumpy()[0, 0])
    assert version == 1 + len(symbol.list_arguments()[1]) // 40_000  # both files of one version
    return version


def save_list(path, version):
    from mxkit.io.im2rec import ListItem, write_list

    write_list(str(path), [ListItem(i, f"img{version}-{i}.jpg", (float(version),)) for i in range(1000 * version)])


def load_list(path):
    from mxkit.io.im2rec import read_list

    return int(next(iter(read_list(str(path)))).labels[0])


WRITERS = {
    "Symbol.save": (save_symbol, load_symbol),
    "mx.nd.save": (save_params, load_params),
    "MXIndexedRecordIO": (save_records, load_records),
    "save_optimizer_states": (save_states, load_states),
    "save_checkpoint": (save_checkpoint, load_checkpoint),
    "im2rec write_list": (save_list, load_list),
}


def _leftovers(directory):
    return [name for name in os.listdir(directory) if files.TEMP_MARKER in name or ".tmp" in name]


def _run_child(scenario, *args):
    """Run this file as a script (a fresh process: forking one with engine threads is unsafe)."""
    return subprocess.run([sys.executable, __file__, scenario, *args], capture_output=True, text=True,
                          timeout=120)


def test_disk_full_keeps_the_previous_file_of_every_writer(tmp_path):
    paths = {}
    for writer, (save, _) in WRITERS.items():
        paths[writer] = tmp_path / writer.replace(" ", "_").replace(".", "_")
        save(paths[writer], 1)
    done = _run_child("disk-full", *(f"{writer}={path}" for writer, path in paths.items()))
    assert done.returncode == 0, done.stdout + done.stderr
    for writer, path in paths.items():
        assert f"{writer}: failed with errno {errno.EFBIG}" in done.stdout, done.stdout
        assert WRITERS[writer][1](path) == 1, writer
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_kill_mid_write_keeps_the_previous_file(tmp_path, writer):
    save, load = WRITERS[writer]
    path = tmp_path / "target"
    save(path, 1)
    done = _run_child("kill", f"{writer}={path}")
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    assert load(path) == 1
    assert _leftovers(tmp_path)  # the dead writer's temporary ...
    save(path, 2)
    assert load(path) == 2
    assert _leftovers(tmp_path) == []  # ... is removed by the next save


def _child(scenario, targets):
    if scenario == "disk-full":
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    else:
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed before the rename
    for target in targets:
        writer, _, path = target.partition("=")
        try:
            WRITERS[writer][0](path, 2)
            print(f"{writer}: wrote")
        except Exception as exc:  # a writer may wrap the OSError in its own error
            cause = exc if isinstance(exc, OSError) else (exc.__cause__ or exc.__context__)
            print(f"{writer}: failed with errno {getattr(cause, 'errno', None)} ({exc!r})")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
