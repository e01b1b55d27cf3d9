"""An outside package's KVStore type (tests/plugins/mxkit-recorder-plugin, module
``mxkit_recorder_plugin.kvstore``) is found by ``mx.kv.create`` through its entry point
alone, and behaves like the built-in stores through the shared ``KVStoreBase``."""

from importlib import metadata

import numpy as np
import pytest


def test_the_kvstore_entry_point_is_installed():
    names = {ep.name: ep.value for ep in metadata.entry_points(group="mxkit")}
    assert names.get("recorder_kvstore") == "mxkit_recorder_plugin.kvstore"


def test_mx_kv_create_finds_the_outside_kvstore_type(fresh_plugins):
    mx = pytest.importorskip("mxkit.mx")
    from mxkit.kvstore import KVStoreBase
    from mxkit_recorder_plugin import kvstore as recorder

    recorder.CALLS.clear()
    kv = mx.kv.create("Recorder_KV")  # names are case-insensitive, like the built-in ones
    assert isinstance(kv, KVStoreBase) and kv.type == "recorder_kv" and (kv.rank, kv.num_workers) == (0, 1)
    kv.init(3, mx.nd.zeros((2, 2)))
    kv.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.5))  # KVStoreBase's, through set_updater
    out = mx.nd.zeros((2, 2))
    kv.pushpull(3, [mx.nd.ones((2, 2)), mx.nd.ones((2, 2))], out=out)  # KVStoreBase's: push, then pull
    np.testing.assert_allclose(out.asnumpy(), np.full((2, 2), -1.0))  # 0 - 0.5 * (1 + 1)
    assert recorder.CALLS == [("create", "recorder_kv"), ("init", 3), ("push", 3), ("pull", 3)]
    origin = {name: info for name, _, info in fresh_plugins.registry("kvstore").items()}["recorder_kv"]
    assert origin.distribution == "mxkit-recorder-plugin"


def test_the_built_in_types_are_registrations_too_and_an_unknown_name_lists_the_choices(fresh_plugins):
    import mxkit.kvstore as kvstore
    from mxkit.core.errors import KVStoreError

    registry = fresh_plugins.registry("kvstore")
    for name in ("local", "device", "dist_sync", "dist_async", "dist_ssp", "local_update_cpu", "dist_sync_device"):
        assert registry.get(name).factory is not None, name
    origins = {name: info.plugin for name, _, info in registry.items()}
    assert origins["local"] == origins["dist_ssp"] == "mxkit.kvstore.plugin"
    assert type(kvstore.create("local_allreduce_device")).__name__ == "KVStore"
    with pytest.raises(KVStoreError, match=r"unknown KVStore type 'recorder_kb'; choose one of .*recorder_kv"):
        kvstore.create("recorder_kb")
