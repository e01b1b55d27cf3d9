"""Bad input fails at the call with an mxkit error that names the problem and the fix."""

import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import config
from mxkit.core.errors import (
    FormatError,
    KVStoreError,
    MissingComponentError,
    MXKitError,
    ShapeError,
    UnknownPluginError,
)
from mxkit.kvstore import create


@pytest.fixture(params=["local", "device"])
def kv(request):
    return create(request.param)


def test_push_and_pull_before_init(kv):
    with pytest.raises(KVStoreError, match=r"push of key 3 before init; call kv.init\(3, value\)"):
        kv.push(3, nd.ones((2,)))
    with pytest.raises(KVStoreError, match=r"pull of key 'w' before init"):
        kv.pull("w", out=nd.ones((2,)))


def test_shape_mismatch_on_push_and_pull(kv):
    kv.init(1, nd.zeros((2, 3)))
    with pytest.raises(ShapeError, match=r"push of key 1: an array has shape \(3, 2\), the key was initialised "
                                         r"with shape \(2, 3\)"):
        kv.push(1, [nd.ones((2, 3)), nd.ones((3, 2))])
    with pytest.raises(ShapeError, match=r"pull of key 1: an array has shape \(6,\)"):
        kv.pull(1, out=nd.zeros((6,)))


def test_a_failed_push_pushes_nothing(kv):
    kv.init([1, 2], [nd.zeros((2,)), nd.zeros((2,))])
    with pytest.raises(ShapeError):
        kv.push([1, 2], [nd.ones((2,)), nd.ones((5,))])  # key 1 is fine, key 2 is not
    out = nd.ones((2,))
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [0.0, 0.0])


def test_mixed_key_types(kv):
    with pytest.raises(KVStoreError, match=r"mixed types \[1, 'a'\]; keys must be all ints or all strs"):
        kv.init([1, "a"], [nd.zeros((1,)), nd.zeros((1,))])
    kv.init(1, nd.zeros((1,)))
    with pytest.raises(KVStoreError, match=r"init of key 'b' \(str\): this store's keys are ints"):
        kv.init("b", nd.zeros((1,)))
    with pytest.raises(KVStoreError, match=r"push of key 'b' \(str\): this store's keys are ints"):
        kv.push("b", nd.zeros((1,)))
    with pytest.raises(KVStoreError, match=r"must be an int or a str, got 1.5"):
        kv.push(1.5, nd.zeros((1,)))


def test_duplicate_init_and_bad_values(kv):
    kv.init(0, nd.zeros((2,)))
    with pytest.raises(KVStoreError, match="duplicate init of key 0"):
        kv.init(0, nd.zeros((2,)))
    with pytest.raises(KVStoreError, match=r"push of key 0 needs an NDArray or a non-empty list of NDArrays.*"
                                           r"got ndarray.*mx.nd.array"):
        kv.push(0, np.zeros(2))
    with pytest.raises(KVStoreError, match="got 2 keys and 1 values"):
        kv.push([0, 0], [nd.zeros((2,))])
    with pytest.raises(KVStoreError, match="pull needs out="):
        kv.pull(0)


def test_unknown_compressor_and_bad_compression_parameters(kv):
    with pytest.raises(UnknownPluginError, match=r"unknown gradient compressor '3bit'; available: .*2bit.*fp16"):
        kv.set_gradient_compression({"type": "3bit"})
    with pytest.raises(KVStoreError, match=r"'2bit' got unknown parameters \['treshold'\]; it takes \['threshold'\]"):
        kv.set_gradient_compression({"type": "2bit", "treshold": 0.5})
    with pytest.raises(KVStoreError, match=r"threshold must be a positive finite number, got -1"):
        kv.set_gradient_compression({"type": "2bit", "threshold": -1})
    with pytest.raises(KVStoreError, match=r"needs a 'type' string"):
        kv.set_gradient_compression({"threshold": 0.5})
    with pytest.raises(KVStoreError, match=r"ratio must be in \(0, 1\], got 2"):
        kv.set_gradient_compression({"type": "topk", "ratio": 2})


def test_unknown_consistency_model():
    with pytest.raises(UnknownPluginError, match=r"unknown consistency model 'linearizable'.*available: "
                                                 r"bounded_delay, eventual, .*sequential"):
        create("local", consistency="linearizable")
    with config.override(consistency="causal"), \
            pytest.raises(UnknownPluginError, match=r"'causal' \(from config 'consistency' from override\(\)\)"):
        create("local")
    with pytest.raises(KVStoreError, match=r"'bounded_delay' needs an int tau >= 0, got -1"):
        create("local", consistency="bounded_delay", tau=-1)
    with pytest.raises(KVStoreError, match=r"'sequential' got unknown options \['tau'\]"):
        create("local", consistency="sequential", tau=2)


def test_unknown_and_distributed_types(monkeypatch):
    with pytest.raises(KVStoreError, match=r"unknown KVStore type 'locall'; choose one of device, dist_async, "
                                           r"dist_ssp, dist_sync, local"):
        create("locall")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the dist extra were not installed
    with pytest.raises(MissingComponentError, match=r"the distributed KVStore needs Ray; install it with "
                                                    r"pip install 'mxkit-kvstore\[dist\]'"):
        create("dist_sync")


def test_updater_and_optimizer_misuse(kv, tmp_path):
    with pytest.raises(KVStoreError, match="set_updater needs a callable"):
        kv.set_updater(42)
    with pytest.raises(KVStoreError, match=r"object lacks create_state, update"):
        kv.set_optimizer(object())
    with pytest.raises(KVStoreError, match=r"save_optimizer_states needs an optimizer: call kv.set_optimizer"):
        kv.save_optimizer_states(tmp_path / "states")


def test_loading_a_pickle_or_garbage_as_optimizer_states_fails_cleanly(kv, tmp_path, momentum_sgd):
    import pickle

    kv.set_optimizer(momentum_sgd())
    pickled = tmp_path / "pickled.states"
    pickled.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(FormatError, match="is not an optimizer states file"):
        kv.load_optimizer_states(pickled)
    object_array = tmp_path / "objects.npz"
    np.savez(object_array, __manifest__=np.array([{"format": 1}], dtype=object))
    with pytest.raises(FormatError, match="is not an optimizer states file"):  # allow_pickle=False refuses it
        kv.load_optimizer_states(object_array)


def test_errors_are_mxkit_errors():
    assert issubclass(KVStoreError, MXKitError)
