"""How a module's devices agree on parameters: through a KVStore, or by summing gradients locally.

These are MXNet 1.x's ``mx.model`` helpers with their names and semantics:
``_create_kvstore`` picks the store and whether it runs the optimizer (``update_on_kvstore``),
``_initialize_kvstore`` seeds it, ``_update_params_on_kvstore`` pushes gradients and pulls
updated weights, and ``_update_params`` pushes and pulls gradients (summed over devices)
and runs the updater on every device.

One deliberate difference: with no store and several devices, MXNet updated each device
with its own slice's gradient, so the copies drifted apart; here the gradients are summed
over the devices first, so every device applies the same update, as with a local store.
"""

from __future__ import annotations

import os
from math import prod
from typing import Any

from mxkit.core.errors import ConfigError

# a 'local' store stops running the optimizer past this many elements in one array (MXNet's rule:
# the store's single CPU update becomes the bottleneck)
_LOCAL_UPDATE_LIMIT = 1024 * 1024 * 16


def _is_kvstore(value: Any) -> bool:
    return all(hasattr(value, attr) for attr in ("push", "pull", "init"))


def _update_on_kvstore_default() -> bool:
    from mxkit.core import config

    value, source = config.resolve("update_on_kvstore")
    if source == "default" and "MXNET_UPDATE_ON_KVSTORE" in os.environ:
        raw = os.environ["MXNET_UPDATE_ON_KVSTORE"]  # MXNet's name, for scripts written for it
        try:
            return bool(int(raw))
        except ValueError:
            raise ConfigError(f"MXNET_UPDATE_ON_KVSTORE must be 0 or 1, got {raw!r}") from None
    return bool(value)


def _create_kvstore(kvstore: Any, num_device: int, arg_params: dict) -> tuple[Any, bool]:
    """The store to use and whether it runs the optimizer.

    Parameters
    ----------
    kvstore : KVStore, str or None
        A store, a store type for ``mx.kv.create`` (``local``, ``device``, ``dist_sync``...), or None.
    num_device : int
        Devices of the module (one device and a non-distributed type need no store).
    arg_params : dict of str to NDArray
        The parameters (their sizes decide ``update_on_kvstore`` for ``local``).

    Returns
    -------
    (KVStore or None, bool)
    """
    update_on_kvstore = _update_on_kvstore_default()
    if kvstore is None:
        kv = None
    elif _is_kvstore(kvstore):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            kv = None  # one device: the updater runs in place, no store needed
        else:
            kv = _new_store(kvstore)
            if kv is not None and kvstore == "local" and arg_params:
                largest = max(prod(p.shape) for p in arg_params.values())
                if largest > _LOCAL_UPDATE_LIMIT:
                    update_on_kvstore = False
    else:
        raise ConfigError(f"kvstore must be a KVStore, a type name such as 'local' or 'device', or None; got "
                          f"{type(kvstore).__name__} {kvstore!r}")
    if kv is None:
        return None, False
    capable = getattr(kv, "is_capable", None)
    if capable is not None:
        update_on_kvstore = update_on_kvstore and bool(capable("optimizer"))
    return kv, update_on_kvstore


def _new_store(kind: str) -> Any:
    """``mx.kv.create(kind)``; None for a non-distributed type when this mxkit has no store yet."""
    import mxkit.kvstore as kvs

    create = getattr(kvs, "create", None)
    if create is None:
        if "dist" in kind:
            raise ConfigError(f"kvstore {kind!r} needs mxkit-kvstore's distributed store, which this installation "
                              f"lacks; use kvstore='local' or None")
        return None  # gradients are summed over devices by _update_params instead
    return create(kind)


def _initialize_kvstore(kvstore: Any, param_arrays: list, arg_params: dict, param_names: list[str],
                        update_on_kvstore: bool) -> None:
    """Seed the store with every parameter; pull them back when the store runs the optimizer."""
    for index, param_on_devs in enumerate(param_arrays):
        name = param_names[index]
        kvstore.init(name, arg_params[name])
        if update_on_kvstore:
            kvstore.pull(name, param_on_devs, priority=-index)


def _update_params_on_kvstore(param_arrays: list, grad_arrays: list, kvstore: Any, param_names: list[str]) -> None:
    """Push every gradient; the store updates the weight and every device pulls it.

    A local store gets one call per key, with the first layers' pulls at the highest
    priority (they run first among ready engine operations). A distributed store gets one
    pushpull of all keys: it batches the keys of one call into one request per server
    (one round trip for the step), and runs it as an engine operation that reads the
    gradients and writes the weights, so this returns at once and the next forward waits
    for the weights (MXNet's overlap of communication with compute).
    """
    updated = [(index, arg_list, grad_list)
               for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays))
               if grad_list[0] is not None]
    if "dist" in str(getattr(kvstore, "type", "")):
        names = [param_names[index] for index, _, _ in updated]
        grads, weights = [grad_list for _, _, grad_list in updated], [arg_list for _, arg_list, _ in updated]
        pushpull = getattr(kvstore, "pushpull", None)
        if pushpull is not None:
            pushpull(names, grads, out=weights)
        else:  # a store made elsewhere with only MXNet's older push and pull
            kvstore.push(names, grads)
            kvstore.pull(names, out=weights)
        return
    for index, arg_list, grad_list in updated:
        name = param_names[index]
        kvstore.push(name, grad_list, priority=-index)
        kvstore.pull(name, arg_list, priority=-index)


def _sum_over_devices(grad_list: list) -> None:
    """Replace each device's gradient by the sum over all devices (what a local store's push+pull does)."""
    first = grad_list[0]
    total = first.copy()
    for grad in grad_list[1:]:
        total += grad.as_in_context(first.context)
    for grad in grad_list:
        grad[:] = total


def _update_params(param_arrays: list, grad_arrays: list, updater: Any, num_device: int, kvstore: Any = None,
                   param_names: list[str] | None = None, row_sparse: Any = ()) -> None:
    """Aggregate gradients (through ``kvstore``, or summed locally) and run ``updater`` on every device.

    The updater's index of parameter ``i`` on device ``k`` is ``i * num_device + k``, as in
    MXNet, so each device keeps its own optimizer state. An updater that aggregates
    (``updater.aggregate_updates``, as the built-in optimizers' do) gets each device's
    parameters in one call, as MXNet 1.x passes them: it updates up to
    ``optimizer.aggregate_num`` weights per engine operation instead of one operation per
    weight (a ResNet-50 has 161 of them).

    The parameters at positions ``row_sparse`` (variables declared ``stype='row_sparse'``)
    reach the updater with row_sparse gradients (the rows with a nonzero gradient), which
    the optimizers update lazily as MXNet's do.
    """
    aggregate = bool(getattr(updater, "aggregate_updates", False))
    per_device: list[list[tuple[int, Any, Any]]] = [[] for _ in range(num_device)]
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays)):
        if grad_list[0] is None:
            continue
        if kvstore is not None:
            name = param_names[index] if param_names is not None else index
            kvstore.push(name, grad_list, priority=-index)
            kvstore.pull(name, grad_list, priority=-index)
        elif num_device > 1:
            _sum_over_devices(grad_list)
        for k, (weight, grad) in enumerate(zip(arg_list, grad_list)):
            if index in row_sparse:
                grad = grad.tostype("row_sparse")
            if aggregate:
                per_device[k].append((index * num_device + k, grad, weight))
            else:
                updater(index * num_device + k, grad, weight)
    for updates in per_device:
        if updates:
            indices, grads, weights = zip(*updates)
            updater(list(indices), list(grads), list(weights))


__all__ = ["_create_kvstore", "_initialize_kvstore", "_update_params", "_update_params_on_kvstore"]
