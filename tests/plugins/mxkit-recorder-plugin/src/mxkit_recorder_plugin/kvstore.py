"""The example plugin's KVStore type ``recorder_kv``: an in-memory store that records its calls.

It is registered through the hook ``mxkit_kvstores`` and subclasses the published
``mxkit.kvstore.KVStoreBase``, so ``mx.kv.create("recorder_kv")`` makes one and the
shared behaviour (``pushpull``, ``broadcast``, ``set_optimizer``, the description
properties...) comes with it. It uses only public NDArray methods.
"""

from mxkit.core import hookimpl
from mxkit.core.specs import KVStoreSpec

#: every call the store saw, for tests to inspect
CALLS: list[tuple[str, object]] = []


def make_store(name, **options):
    """The factory ``mx.kv.create`` calls (imports mxkit-kvstore only then)."""
    from mxkit.kvstore import KVStoreBase

    class RecorderKVStore(KVStoreBase):
        """Sums pushes on the host with numpy; an updater merges them, else they replace the value."""

        def __init__(self, kvtype, **unused):
            self._type = kvtype
            self._values = {}
            self._updater = None
            CALLS.append(("create", kvtype))

        def init(self, key, value):
            keys, values = (key, value) if isinstance(key, (list, tuple)) else ([key], [value])
            for k, v in zip(keys, values, strict=True):
                self._check_kind(k, "init")
                self._key_kind = type(k)
                self._values[k] = v.copy()
                CALLS.append(("init", k))

        def push(self, key, value, priority=0):
            keys, values = (key, value) if isinstance(key, (list, tuple)) else ([key], [value])
            for k, v in zip(keys, values, strict=True):
                arrays = v if isinstance(v, (list, tuple)) else [v]
                total = arrays[0].copy()
                for array in arrays[1:]:
                    total += array
                if self._updater is not None:
                    self._updater(k, total, self._values[k])
                else:
                    self._values[k][:] = total
                CALLS.append(("push", k))

        def pull(self, key, out=None, priority=0, ignore_sparse=True):
            keys, outs = (key, out) if isinstance(key, (list, tuple)) else ([key], [out])
            for k, o in zip(keys, outs, strict=True):
                for target in o if isinstance(o, (list, tuple)) else [o]:
                    target[:] = self._values[k]
                CALLS.append(("pull", k))

        def set_updater(self, updater):
            self._updater = updater

    return RecorderKVStore(name, **options)


@hookimpl
def mxkit_kvstores():
    yield KVStoreSpec(name="recorder_kv", factory=make_store, description="an in-memory store that records its "
                      "calls (example plugin)")
