"""Registers device type ``gpu`` (alias ``cuda``) through the public hook."""

from mxkit.core import hookimpl
from mxkit.core.specs import BackendSpec


def _make_gpu_backend(device_id: int):
    from mxkit.core.errors import DeviceError
    from mxkit_cuda.device import require_gpu

    require_gpu(device_id)
    raise DeviceError(
        f"gpu({device_id}) is present, but this version of mxkit-cuda has no array backend yet"
    )


@hookimpl
def mxkit_backends():
    yield BackendSpec(name="cupy", device_type="gpu", aliases=("cuda",), factory=_make_gpu_backend,
                      description="NVIDIA GPUs through CuPy")
