"""The CUDA backend next to CuPy and PyTorch on the same GPU (skips itself without a GPU).

In one run:

- **matrix products**: TFLOP/s of ``mx.nd.dot`` on ``gpu(0)`` (pushed to the engine, launched
  on the device's compute stream) against ``cupy.matmul`` into a preallocated output, the
  limit for this path; float32 and float16, square sizes 4096 and 8192;
- **ResNet-50 training**: images/s of a full SGD step (forward, backward, update) at batch 64,
  224x224, mxkit's executor against PyTorch (torchvision's resnet50, when importable), both
  float32 with each framework's default math settings. mxkit runs twice: with each phase
  replayed from a CUDA graph (config ``exec_record``, the default) and launching kernel by
  kernel; ``--profile`` adds where the GPU's time goes (kernel time per step by kernel, read
  through PyTorch's CUPTI profiler, which sees CuPy's and cuDNN's kernels too);
- **memory**: the executor's memory plan (bytes of intermediates, arguments and gradients)
  against the peak of CuPy's pool measured during the same training step.

Ratios are mxkit over the anchor for throughput (above 1 means mxkit is faster). Nothing
here asserts on time.

    python benchmarks/gpu.py [--iterations 20] [--profile]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def gpu_available() -> str | None:
    try:
        from mxkit_cuda.device import cuda_unavailable_reason
    except ImportError:
        return "mxkit-cuda is not installed"
    return cuda_unavailable_reason()


# ---- matrix products ----------------------------------------------------------------------------

def matmul_rows(sizes, dtypes, iterations):
    import cupy
    from mxkit.core import gpu
    from mxkit.ndarray import dot
    from mxkit.ndarray import random as nd_random

    rows = []
    for dtype in dtypes:
        for n in sizes:
            flops = 2.0 * n ** 3
            a = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
            b = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype(dtype)
            out = cupy.empty((n, n), dtype=dtype)

            def run_cupy(a=a, b=b, out=out):
                for _ in range(iterations):
                    cupy.matmul(a, b, out=out)
                cupy.cuda.Device().synchronize()

            x = nd_random.normal(shape=(n, n), ctx=gpu(0)).astype(dtype)
            y = nd_random.normal(shape=(n, n), ctx=gpu(0)).astype(dtype)
            target = dot(x, y)

            def run_mxkit(x=x, y=y, target=target):
                for _ in range(iterations):
                    dot(x, y, out=target)
                target.wait_to_read()
                cupy.cuda.Device().synchronize()

            cupy_s, mxkit_s = best_alternated(run_cupy, run_mxkit)
            rows.append((f"dot {dtype} {n}x{n}", flops * iterations / mxkit_s / 1e12,
                         flops * iterations / cupy_s / 1e12))
    return rows


def best_alternated(*runs, rounds=6):
    """The best time of each run over ``rounds`` rounds that take them in turn, in the opposite
    order every other round (the GPU's clock drifts with its temperature and drops under a
    sustained load: alternating gives each run the same conditions, and reversing the order
    keeps one run from always following the others' heat)."""
    for run in runs:
        run()  # warm-up: kernels compiled, pools filled
    best = [float("inf")] * len(runs)
    for round_number in range(rounds):
        order = list(enumerate(runs))
        if round_number % 2:
            order.reverse()
        for i, run in order:
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


# ---- ResNet-50 ----------------------------------------------------------------------------------

def resnet50_symbol(num_classes=1000):
    """ResNet-50 v1 (bottleneck units 3-4-6-3), as MXNet's example symbols build it."""
    from mxkit import symbol as sym

    def conv_bn(data, channels, kernel, stride, pad, name, relu=True):
        net = sym.Convolution(data, num_filter=channels, kernel=kernel, stride=stride, pad=pad, no_bias=True,
                              name=f"{name}_conv")
        net = sym.BatchNorm(net, fix_gamma=False, eps=2e-5, momentum=0.9, name=f"{name}_bn")
        return sym.Activation(net, act_type="relu", name=f"{name}_relu") if relu else net

    def unit(data, channels, stride, project, name):
        mid = channels // 4
        net = conv_bn(data, mid, (1, 1), stride, (0, 0), f"{name}_a")
        net = conv_bn(net, mid, (3, 3), (1, 1), (1, 1), f"{name}_b")
        net = conv_bn(net, channels, (1, 1), (1, 1), (0, 0), f"{name}_c", relu=False)
        shortcut = conv_bn(data, channels, (1, 1), stride, (0, 0), f"{name}_sc", relu=False) if project else data
        return sym.Activation(net + shortcut, act_type="relu", name=f"{name}_out")

    data = sym.Variable("data")
    net = conv_bn(data, 64, (7, 7), (2, 2), (3, 3), "stem")
    net = sym.Pooling(net, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
    for stage, (units, channels) in enumerate(zip((3, 4, 6, 3), (256, 512, 1024, 2048))):
        for i in range(units):
            stride = (2, 2) if i == 0 and stage > 0 else (1, 1)
            net = unit(net, channels, stride, project=i == 0, name=f"stage{stage + 1}_unit{i + 1}")
    net = sym.Pooling(net, kernel=(7, 7), global_pool=True, pool_type="avg")
    net = sym.FullyConnected(sym.Flatten(net), num_hidden=num_classes, name="fc")
    return sym.SoftmaxOutput(net, name="softmax")


def mxkit_resnet50(batch, iterations, record=True, profile=False):
    from mxkit.core import config, gpu
    from mxkit.ndarray import waitall

    ctx = gpu(0)
    backend = ctx.backend
    backend.release()
    backend.reset_peak()
    base = backend.memory_stats()["in_use"]
    workspace_before = cudnn_workspace_bytes()
    net = resnet50_symbol()
    with config.override(exec_record=record):
        executor = net.simple_bind(ctx=ctx, data=(batch, 3, 224, 224), softmax_label=(batch,))
    rng = np.random.default_rng(0)
    params = [n for n in executor.arg_dict if n not in ("data", "softmax_label")]
    for name in params:
        array = executor.arg_dict[name]
        array[:] = rng.standard_normal(array.shape).astype(np.float32) * 0.05 if name.endswith("weight") else (
            1.0 if name.endswith("gamma") else 0.0)
    executor.arg_dict["data"][:] = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
    executor.arg_dict["softmax_label"][:] = rng.integers(0, 1000, batch).astype(np.float32)
    lr = 0.01 / batch

    def step():
        executor.forward(is_train=True)
        executor.backward()
        for name in params:
            executor.arg_dict[name] -= executor.grad_dict[name] * lr

    for _ in range(3):  # the first run searches algorithms, the second records the phases
        step()
    waitall()
    backend.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    waitall()
    backend.synchronize()
    seconds = time.perf_counter() - start
    peak = backend.memory_stats()["peak"] - base
    if profile:
        print_gpu_profile(step, backend)
    bound = [a for a in (*executor.arg_arrays, *executor.grad_arrays, *executor.aux_arrays, *executor.outputs)
             if a is not None]
    accounted = executor.memory_plan.total_bytes + sum(a.size * np.dtype(a.dtype).itemsize for a in bound)
    accounted += cudnn_workspace_bytes() - workspace_before  # what this run grew the shared workspace by
    unrecorded = sorted({name.rsplit("(", 1)[-1].rstrip(")") for name in executor.unrecorded_nodes})
    phases = executor.recorded_phases
    if executor.unrecorded_nodes:
        phases = [*phases, f"{len(executor.unrecorded_nodes)} nodes unrecorded ({', '.join(unrecorded)})"]
    return batch * iterations / seconds, executor.memory_plan, (peak, accounted), phases


def cudnn_workspace_bytes():
    try:
        from mxkit_cuda.cudnn import workspace_bytes
    except ImportError:
        return 0
    return workspace_bytes(0)


def print_gpu_profile(step, backend, steps=3):
    """Kernel time per step on the GPU, by kernel, against the wall time (CUPTI, through PyTorch)."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("  (--profile needs PyTorch for its CUPTI profiler)")
        return
    from mxkit.ndarray import waitall

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        waitall()
        backend.synchronize()
        wall = (time.perf_counter() - start) / steps
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy = sum(e.device_time for e in events) / steps / 1e3
    print(f"  wall {wall * 1e3:.1f} ms per step; GPU kernel time {busy:.1f} ms per step; "
          f"{len(events) // steps} kernels per step")
    totals = {}
    for e in events:
        count, time_us = totals.get(e.name, (0, 0.0))
        totals[e.name] = (count + 1, time_us + e.device_time)
    for name, (count, time_us) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:18]:
        print(f"  {time_us / steps / 1e3:8.2f} ms {count // steps:5d}x  {name[:90]}")


def torch_resnet50(batch, iterations):
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(batch, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(data), labels).backward()
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    torch.cuda.synchronize()
    return batch * iterations / (time.perf_counter() - start)


# ---- report -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10, help="timed ResNet-50 steps")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--skip-matmul", action="store_true")
    parser.add_argument("--profile", action="store_true", help="where the GPU time of a ResNet-50 step goes")
    args = parser.parse_args()
    reason = gpu_available()
    if reason is not None:
        print(f"gpu benchmark skipped: {reason}")
        return
    import cupy

    print(f"device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cupy.__version__}")
    print()
    if not args.skip_matmul:
        print(f"{'matrix product':<24}{'mxkit TFLOP/s':>15}{'CuPy TFLOP/s':>15}{'mxkit/CuPy':>12}")
        for name, ours, theirs in matmul_rows((4096, 8192), ("float32", "float16"), iterations=50):
            print(f"{name:<24}{ours:>15.1f}{theirs:>15.1f}{ours / theirs:>12.3f}")
        print()
    if args.skip_resnet:
        return
    unrecorded, _, unrecorded_peak, _ = mxkit_resnet50(args.batch, args.iterations, record=False)
    images, plan, peak, phases = mxkit_resnet50(args.batch, args.iterations, profile=args.profile)
    theirs = torch_resnet50(args.batch, args.iterations)
    print(f"{'ResNet-50 training, batch ' + str(args.batch):<40}{'images/s':>10}{'mxkit/PyTorch':>15}")
    rows = [("mxkit (executor, CUDA graphs)", images), ("mxkit (executor, kernel by kernel)", unrecorded)]
    for name, value in rows:
        ratio = f"{value / theirs:>15.3f}" if theirs else ""
        print(f"{name:<40}{value:>10.1f}{ratio}")
    print(f"{'PyTorch (torchvision resnet50)':<40}{theirs:>10.1f}" if theirs else f"{'PyTorch':<40}{'n/a':>10}")
    print(f"  replayed from CUDA graphs: {', '.join(phases) or 'nothing'}")
    print()
    mib = 2 ** 20
    print("memory of one ResNet-50 training step (MiB)")
    print(f"  plan: intermediates {plan.total_bytes / mib:,.0f} (lower bound {plan.lower_bound_bytes / mib:,.0f}, "
          f"strategy {plan.strategy})")
    for label, (measured, accounted) in (("CUDA graphs", peak), ("kernel by kernel", unrecorded_peak)):
        print(f"  {label}: CuPy pool peak above the start {measured / mib:,.0f}; accounted (plan, bound arrays, "
              f"cuDNN workspace) {accounted / mib:,.0f}; peak / accounted {measured / accounted:.3f}")


if __name__ == "__main__":
    main()
