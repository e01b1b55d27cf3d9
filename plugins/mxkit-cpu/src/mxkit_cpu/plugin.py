"""Registers device type ``cpu`` through the public hook, as any third party would."""

from mxkit.core import hookimpl
from mxkit.core.specs import BackendSpec, OptionSpec


def _make_cpu_backend(device_id: int):
    from mxkit_cpu.backend import CPUBackend
    from mxkit_cpu.blas import limit_blas_threads
    from mxkit_cpu.host_memory import hold_mmap_threshold

    limit_blas_threads()  # see mxkit_cpu.blas: a multi-threaded BLAS under the engine's threads is slow
    hold_mmap_threshold()  # see mxkit_cpu.host_memory: freed large buffers leave the process
    return CPUBackend(device_id)


@hookimpl
def mxkit_backends():
    # MXNet code allocates data-loader batches on cpu_pinned / cpu_shared; without a GPU
    # plugin that claims them they are plain host memory.
    yield BackendSpec(name="numpy", device_type="cpu", aliases=("cpu_pinned", "cpu_shared"),
                      factory=_make_cpu_backend, description="host memory, numpy kernels")


@hookimpl
def mxkit_kernels(registry):
    from mxkit_cpu.kernels import register

    register(registry)


@hookimpl
def mxkit_options():
    """The thread counts of the CPU kernels (mxkit_cpu.parallel) and of numpy's BLAS (mxkit_cpu.blas),
    and glibc's mmap threshold (mxkit_cpu.host_memory)."""
    yield OptionSpec("cpu_kernel_threads", "int", 0,
                     "threads one CPU convolution, pooling or activation kernel splits its work across "
                     "(0: one per core)", minimum=0)
    yield OptionSpec("cpu_blas_threads", "int", 1,
                     "threads of numpy's BLAS once mxkit uses the CPU (0: leave the library's own setting); "
                     "big products are split across cpu_kernel_threads instead", minimum=0)
    yield OptionSpec("cpu_malloc_mmap_threshold", "int", 1 << 20,
                     "bytes from which glibc's malloc maps each block on its own and unmaps it when freed, held "
                     "fixed once mxkit uses the CPU (0: glibc's moving threshold, which keeps freed large "
                     "blocks resident)", minimum=0)
