"""One run of benchmarks/memory_real.py in a fresh process: ``python _memory_real_worker.py JOB_JSON``.

The job names the framework (``mxkit`` or ``mxnet``: the same Module code in either), the zoo graph,
the setting (``predict`` or ``train``), the batch and image size and the number of timed batches.
It prints one line ``RESULT {json}`` with, in bytes unless named otherwise:

- ``baseline``: resident memory after the imports and one tiny convolution (which loads the kernel
  libraries, oneDNN included), before any network: the interpreter, numpy and the framework;
- ``peak``: the process's peak resident memory over the whole run (``getrusage``), ``warmup_peak`` and
  ``steady_peak`` the peaks of the first batch and of the timed ones (Linux's peak counter is reset
  between them through ``/proc/self/clear_refs``; without it both are ``null``);
- ``seconds``: the best timed batch;
- for mxkit, ``rest``: resident memory after the timed batches, ``library_pages``: how much more of the
  libraries' files is resident then than at the baseline (code first run by the network),
  ``accounted``: what mxkit knows it holds (:func:`accounted_bytes`), and with ``instrument``
  ``outside``: what a steady-state batch allocates beyond it (:func:`outside_the_plan`).
"""

from __future__ import annotations

import ctypes
import json
import resource
import sys
import time

import numpy as np

#: numpy reports its data buffers to tracemalloc in this domain (numpy/_core/src/multiarray/alloc.c)
NUMPY_TRACE_DOMAIN = 389047


def resident() -> dict[str, int]:
    """VmRSS, VmHWM (the peak since start or the last reset) and RssFile (pages of mapped files: the
    libraries' code and data) of this process, in bytes."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssFile"):
                fields[name] = int(value.split()[0]) * 1024
    return fields


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter to the current RSS (Linux 4.0 on); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def malloc_free_bytes() -> int | None:
    """Bytes glibc's malloc holds free in its arenas (``mallinfo2().fordblks``), or None off glibc."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        return None
    return int(libc.mallinfo2().fordblks)


def storage_owner(array):
    """The numpy array that owns ``array``'s memory (views point at it through ``base``)."""
    while isinstance(getattr(array, "base", None), np.ndarray):
        array = array.base
    return array


def unique_bytes(ndarrays) -> int:
    """Bytes of the distinct memory behind NDArrays (views of one buffer count it once)."""
    owners = {}
    for array in ndarrays:
        if array is not None:
            owner = storage_owner(array.storage)
            owners[id(owner)] = owner.nbytes
    return sum(owners.values())


def flat_states(state):
    if state is None:
        return []
    if isinstance(state, (list, tuple)):
        return [leaf for part in state for leaf in flat_states(part)]
    return [state] if hasattr(state, "storage") else []


def accounted_bytes(mod, batch_data, train: bool) -> dict[str, int]:
    """What an mxkit Module on the CPU knows it holds, by part (bytes).

    ``plan``: the executors' memory pools (every intermediate, placed by the memory planner);
    ``arrays``: the bound arguments (data, labels, weights), their gradients, auxiliary states,
    outputs and the Module's host copies of the parameters; ``optimizer``: the optimizer's states;
    ``batch``: the caller's batch arrays; ``workspace``: the oneDNN kernels' workspace buffers
    (reordered copies and scratchpads, sized by the largest call). Memory shared between parts
    (an argument that is also a host copy) counts once.
    """
    executors = list(mod._exec_group.execs)
    twins = [twin for twin in (getattr(e, "_twin", None) for e in executors) if twin is not None]
    pools = {}
    for executor in executors + twins:
        for pool in executor._pools:
            pools[id(storage_owner(pool))] = storage_owner(pool).nbytes
    arrays = []
    for executor in executors:
        arrays += list(executor.arg_arrays) + list(executor.grad_arrays) + list(executor.aux_arrays)
        arrays += list(executor.outputs)
    args, aux = mod._arg_params or {}, mod._aux_params or {}
    arrays += list(args.values()) + list(aux.values())
    states = []
    if train and mod._updater is not None:
        for state in mod._updater.states.values():
            states += flat_states(state)
    parts = {"plan": sum(pools.values()), "arrays": unique_bytes(arrays), "optimizer": unique_bytes(states),
             "batch": unique_bytes(list(batch_data.data) + list(batch_data.label or []))}
    try:
        from mxkit_onednn.program import WORKSPACES

        parts["workspace"] = WORKSPACES.nbytes
    except ImportError:
        parts["workspace"] = 0
    parts["scratch"] = kernel_scratch_bytes()
    return parts


def kernel_scratch_bytes() -> int:
    """The scratch buffers mxkit-cpu's kernels keep between calls (column matrices and the like)."""
    from mxkit import mx
    from mxkit.ndarray.invoke import backend_of

    stats = backend_of(mx.cpu()).memory_stats()
    if "scratch" in stats:
        return int(stats["scratch"])
    from mxkit_cpu.parallel import scratch_bytes  # before the backend reported it: this thread's and the lent sets

    return scratch_bytes()


def outside_the_plan(step) -> dict[str, int]:
    """What one steady-state batch allocates of numpy memory beyond what was live before it.

    ``numpy_peak``: the most numpy data (arrays and kernel temporaries alike) live at once during the
    batch above what was live at its start, as tracemalloc counts numpy's buffers; ``backend_count`` /
    ``backend_bytes``: the arrays the CPU backend made during the batch (outputs of imperative calls,
    kernel temporaries asked of the backend); ``malloc_free``: what glibc's malloc keeps free in its
    arenas afterwards (fragmentation: freed, still resident)."""
    import tracemalloc

    from mxkit import mx
    from mxkit.ndarray.invoke import backend_of

    backend = backend_of(mx.cpu())
    made = []
    original = backend.empty

    def counting_empty(shape, dtype):
        out = original(shape, dtype)
        made.append(out.nbytes)
        return out

    tracemalloc.start()
    step()  # the first traced batch: tracemalloc's own tables grow
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    before_numpy = sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.DomainFilter(True, NUMPY_TRACE_DOMAIN)]).statistics("filename"))
    backend.empty = counting_empty
    try:
        step()
    finally:
        del backend.empty
    peak = tracemalloc.get_traced_memory()[1]
    after_numpy = sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.DomainFilter(True, NUMPY_TRACE_DOMAIN)]).statistics("filename"))
    tracemalloc.stop()
    return {"numpy_peak": peak - before, "numpy_growth": after_numpy - before_numpy,
            "backend_count": len(made), "backend_bytes": sum(made), "malloc_free": malloc_free_bytes() or 0}


def main() -> None:
    job = json.loads(sys.argv[1])
    if job["framework"] == "mxnet":
        import mxnet as mx
    else:
        from mxkit import mx
    # the baseline: one tiny convolution loads the kernel libraries (oneDNN) before any network
    tiny = mx.nd.Convolution(mx.nd.ones((1, 1, 4, 4)), mx.nd.ones((1, 1, 3, 3)), kernel=(3, 3), num_filter=1,
                             no_bias=True)
    tiny.asnumpy()
    at_baseline = resident()
    baseline = at_baseline["VmRSS"]
    net = mx.sym.load(job["graph"])
    batch, size = job["batch"], job["size"]
    rng = np.random.default_rng(0)
    data = mx.nd.array(rng.standard_normal((batch, 3, size, size)).astype(np.float32))
    label = mx.nd.array(rng.integers(0, 1000, batch).astype(np.float32))
    train = job["setting"] == "train"
    if train:
        net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"] if train else None,
                        context=mx.cpu())
    mod.bind(data_shapes=[("data", data.shape)], label_shapes=[("softmax_label", label.shape)] if train else None,
             for_training=train)
    mod.init_params(mx.init.Xavier())
    if train:
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9})
    batch_data = mx.io.DataBatch([data], [label] if train else None)

    def step():
        mod.forward(batch_data, is_train=train)
        if train:
            mod.backward()
            mod.update()
        loss = float(mod.get_outputs()[0].asnumpy().ravel()[0])
        mx.nd.waitall()  # the update too: a batch is done when everything it pushed is
        return loss

    bound = resident()
    can_reset = reset_peak()
    step()
    warm = resident()
    reset_peak()
    times, cpu_times = [], []
    for _ in range(job["repeats"]):
        start, cpu = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu)
    steady = resident()
    result = {"seconds": min(times), "cpu_seconds": min(cpu_times), "baseline": baseline, "bound": bound["VmRSS"],
              "warmup_peak": warm["VmHWM"] if can_reset else None,
              "steady_peak": steady["VmHWM"] if can_reset else None}
    peaks = [bound["VmHWM"], warm["VmHWM"], steady["VmHWM"]] if can_reset else []
    result["peak"] = max([*peaks, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024])
    if job["framework"] == "mxkit":
        rest = resident()
        result["rest"] = rest["VmRSS"]
        result["library_pages"] = rest["RssFile"] - at_baseline["RssFile"]
        result["accounted"] = accounted_bytes(mod, batch_data, train)
        if job.get("instrument"):
            result["outside"] = outside_the_plan(step)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
