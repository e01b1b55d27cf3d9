"""set_optimizer and the optimizer states file (an .npz with a JSON manifest, never a pickle)."""

import json

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import cpu
from mxkit.core.errors import FormatError
from mxkit.kvstore import create
from mxkit.kvstore.updater import OptimizerUpdater


def train(kv, steps, keys, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for key in keys:
            kv.push(key, [nd.array(rng.normal(size=(3, 2)).astype(np.float32), ctx=cpu(d)) for d in range(2)])


def pulled(kv, keys):
    outs = [nd.zeros((3, 2)) for _ in keys]
    kv.pull(keys, out=outs)
    return [o.asnumpy() for o in outs]


@pytest.mark.parametrize("kvtype", ["local", "device"])
def test_saved_and_loaded_states_continue_training_exactly(kvtype, tmp_path, momentum_sgd):
    keys = ["fc1_weight", "fc2_weight"]
    start = [nd.array(np.full((3, 2), float(i), np.float32)) for i in range(2)]

    straight = create(kvtype)
    straight.set_optimizer(momentum_sgd())
    straight.init(keys, start)
    train(straight, 3, keys, seed=1)
    train(straight, 2, keys, seed=2)

    first = create(kvtype)
    first.set_optimizer(momentum_sgd())
    first.init(keys, start)
    train(first, 3, keys, seed=1)
    fname = tmp_path / "opt.states"
    first.save_optimizer_states(fname, dump_optimizer=True)

    resumed = create(kvtype)
    optimizer = momentum_sgd()
    resumed.set_optimizer(optimizer)
    resumed.init(keys, [nd.array(v) for v in pulled(first, keys)])
    resumed.load_optimizer_states(fname)
    assert optimizer.num_update == 3 and optimizer._index_update_count == {"fc1_weight": 3, "fc2_weight": 3}
    train(resumed, 2, keys, seed=2)
    for got, expected in zip(pulled(resumed, keys), pulled(straight, keys)):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert optimizer.created == []  # the loaded states were used, none made afresh


def test_the_states_file_is_plain_arrays_and_json(tmp_path, momentum_sgd):
    kv = create("local")
    kv.set_optimizer(momentum_sgd())
    kv.init(7, nd.ones((3, 2)))
    kv.push(7, nd.ones((3, 2)))
    fname = tmp_path / "states.npz"
    kv.save_optimizer_states(fname)
    with np.load(fname, allow_pickle=False) as archive:
        manifest = json.loads(bytes(archive["__manifest__"]).decode())
        assert manifest["states"] == [{"key": 7, "state": {"array": "a0"}}]
        assert "optimizer" not in manifest  # only with dump_optimizer
        np.testing.assert_allclose(archive["a0"], np.full((3, 2), -0.1), rtol=1e-6)


def test_nested_states_round_trip(tmp_path, momentum_sgd):
    updater = OptimizerUpdater(momentum_sgd())
    updater.states = {"w": (nd.ones((2,)), [None, 3.5, nd.zeros((1,))]), "b": None}
    updater.save_states(tmp_path / "s")
    loaded = OptimizerUpdater(momentum_sgd())
    loaded.load_states(tmp_path / "s", {"w": nd.zeros((2,), ctx=cpu(1))})
    first, (none, number, zeros) = loaded.states["w"]
    assert first.context == cpu(1) and np.array_equal(first.asnumpy(), [1.0, 1.0])
    assert none is None and number == 3.5 and zeros.asnumpy().tolist() == [0.0]
    assert loaded.states["b"] is None


def test_a_future_format_version_is_refused(tmp_path):
    fname = tmp_path / "future.npz"
    manifest = {"format": "mxkit-kvstore-optimizer-states", "version": 99, "states": []}
    np.savez(fname, __manifest__=np.frombuffer(json.dumps(manifest).encode(), np.uint8))
    with pytest.raises(FormatError, match="version 99; this mxkit reads version 1"):
        OptimizerUpdater(type("Opt", (), {"create_state": print, "update": print})()).load_states(fname, {})
