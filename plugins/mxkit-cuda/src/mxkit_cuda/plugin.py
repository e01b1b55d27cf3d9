"""Registers device type ``gpu`` (alias ``cuda``) and the CuPy kernels through the public hooks,
exactly as an outside package would."""

from mxkit.core import hookimpl
from mxkit.core.specs import BackendSpec, OptionSpec


def _make_gpu_backend(device_id: int):
    from mxkit_cuda.backend import CUDABackend

    return CUDABackend(device_id)


def _count_gpus() -> int:
    from mxkit_cuda.device import num_gpus

    return num_gpus()


def _memory_info(device_id: int) -> tuple[int, int]:
    from mxkit_cuda.backend import memory_info

    return memory_info(device_id)


@hookimpl
def mxkit_backends():
    yield BackendSpec(name="cupy", device_type="gpu", aliases=("cuda",), factory=_make_gpu_backend,
                      count_devices=_count_gpus, memory_info=_memory_info,
                      description=_description())


def _description() -> str:
    import importlib.util

    text = "NVIDIA GPUs through CuPy (cuBLAS, cuDNN)"
    if importlib.util.find_spec("cupy") is None:  # a lookup, not an import: mxkit info stays fast
        text += "; CuPy is not installed: pip install 'mxkit-cuda[cuda12]' (or [cuda13])"
    return text


@hookimpl
def mxkit_kernels(registry):
    # registering imports no CuPy: the kernels run only on a cupy backend, which needs it
    from mxkit_cuda.kernels import register

    register(registry)


@hookimpl
def mxkit_options():
    """``cuda_tf32`` and ``cuda_conv_autotune`` (mxkit_cuda.cudnn), ``cuda_batchnorm`` (mxkit_cuda.cudnn_batchnorm)."""
    yield OptionSpec("cuda_tf32", "bool", True,
                     "let cuDNN run float32 convolutions on TF32 tensor cores (faster, ~1e-3 relative error)")
    yield OptionSpec("cuda_conv_autotune", "bool", True,
                     "time cuDNN's convolution algorithms on the first call of each shape and keep the fastest "
                     "(as MXNet's MXNET_CUDNN_AUTOTUNE_DEFAULT); off, cuDNN's heuristic choice")
    yield OptionSpec("cuda_batchnorm", "str", "cudnn",
                     "BatchNorm on GPUs: 'cudnn' (cuDNN's spatial batch normalisation where it serves the call, "
                     "as MXNet does) or 'fused' (mxkit's own fused CuPy kernels)", choices=("cudnn", "fused"))
