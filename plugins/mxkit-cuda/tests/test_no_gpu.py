"""mxkit-cuda imports and registers cleanly on machines without a GPU, and says what is missing."""

import pytest
from mxkit.core import Context, gpu, plugins
from mxkit.core.context import clear_backend_cache
from mxkit.core.errors import DeviceError
from mxkit_cuda.device import cuda_unavailable_reason, num_gpus

pytestmark = pytest.mark.skipif(num_gpus() > 0, reason="this machine has a GPU")


@pytest.fixture(autouse=True)
def fresh():
    plugins.reset_plugin_manager()
    clear_backend_cache()
    yield
    plugins.reset_plugin_manager()


def test_gpu_and_cuda_resolve_to_this_plugin():
    assert plugins.get_backend("gpu").name == "cupy"
    assert plugins.get_backend("cuda") is plugins.get_backend("gpu")


def test_using_a_gpu_says_what_is_missing():
    reason = cuda_unavailable_reason()
    assert reason is not None
    with pytest.raises(DeviceError) as info:
        _ = gpu(0).backend
    assert "gpu(0)" in str(info.value) and reason in str(info.value)
    with pytest.raises(DeviceError):
        _ = Context("cuda", 1).backend


def test_num_gpus_is_zero():
    assert num_gpus() == 0


def test_context_counts_no_gpus_and_memory_info_says_why():
    from mxkit.core.context import gpu_memory_info
    from mxkit.core.context import num_gpus as context_num_gpus

    assert context_num_gpus() == 0
    with pytest.raises(DeviceError, match=r"gpu\(0\)"):
        gpu_memory_info(0)
