"""``mx.runtime``: which features this installation has (MXNet's ``mx.runtime.Features()``).

MXNet compiled features in with build flags (``USE_CUDA=1``); mxkit installs them as
components and plugins. ``Features()`` maps upper-case names to :class:`Feature` objects:

- ``CUDA``: a GPU backend is installed and sees at least one GPU;
- ``CUDNN``: the CUDA plugin found cuDNN 9 (only checked when CUDA is enabled);
- ``DIST_KVSTORE``: mxkit-kvstore is installed and Ray is importable (``dist_*`` stores);
- ``NDARRAY``, ``SYMBOL``, ``ENGINE``, ``MEMPLAN``, ``KVSTORE``, ``IO``, ``TRAIN``: the
  components (``pip install mxkit-<name>``);
- ``CPU`` (the mxkit-cpu plugin's kernels), ``NUMEXPR`` (fused kernels through numexpr),
  ``OPENCV`` (cv2 importable);
- ``PLUGIN_<NAME>`` for every plugin registered through the ``mxkit`` entry points;
- ``PROFILER`` (the engine's profiler), and MXNet's other build flags (``INT64_TENSOR_SIZE``,
  ``MKLDNN``, ``NCCL``, ``BLAS_OPEN``, ``CPU_AVX2``...), always disabled: they have no mxkit
  counterpart, and code written for MXNet asks for them to choose a code path.

    >>> features = mx.runtime.Features()
    >>> features.is_enabled("CUDA")
    False
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mxkit.core.errors import MXKitError

#: feature name -> (module whose presence enables it, what it means)
_COMPONENTS = {
    "ENGINE": ("mxkit.engine", "the dependency engine (mxkit-engine)"),
    "NDARRAY": ("mxkit.ndarray", "imperative arrays and operators (mxkit-ndarray)"),
    "MEMPLAN": ("mxkit.memplan", "static memory planning (mxkit-memplan)"),
    "SYMBOL": ("mxkit.symbol", "symbolic graphs and the executor (mxkit-symbol)"),
    "KVSTORE": ("mxkit.kvstore", "key-value stores (mxkit-kvstore)"),
    "IO": ("mxkit.io", "RecordIO and data iterators (mxkit-io)"),
    "TRAIN": ("mxkit.train", "optimizers, metrics and Module (mxkit-train)"),
    "CAFFE": ("mxkit.caffe", "the Caffe model converter (mxkit-caffe)"),
    "CPU": ("mxkit_cpu", "the CPU backend's compiled kernels (mxkit-cpu)"),
    "NUMEXPR": ("numexpr", "fused elementwise kernels through numexpr"),
    "OPENCV": ("cv2", "OpenCV image decoding"),
}


#: MXNet 1.9.1's build flags that mxkit has no counterpart of: known, always disabled, so
#: ``is_enabled("INT64_TENSOR_SIZE")`` answers False (MXNet's default build) instead of failing
_MXNET_BUILD_FLAGS = (
    "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3", "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A",
    "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C", "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL",
    "BLAS_APPLE", "LAPACK", "MKLDNN", "CXX14", "INT64_TENSOR_SIZE", "SIGNAL_HANDLER", "DEBUG", "TVM_OP",
)


@dataclass(frozen=True)
class Feature:
    """One feature: its name, whether it is enabled here, and what it is."""

    name: str
    enabled: bool
    description: str = ""

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _cuda_features() -> list[Feature]:
    from mxkit.core.context import num_gpus

    gpus = num_gpus()
    cudnn = False
    if gpus:
        try:
            from mxkit_cuda.cudnn import library
        except ImportError:
            cudnn = False
        else:
            cudnn = library() is not None
    return [Feature("CUDA", gpus > 0, f"GPUs through the gpu backend ({gpus} found)"),
            Feature("CUDNN", cudnn, "cuDNN 9 convolutions in the CUDA plugin")]


def _plugin_features() -> list[Feature]:
    from mxkit.core.plugins import BUILTIN_PLUGIN_MODULES, CORE_PLUGIN_MODULE, list_plugins

    builtin = {CORE_PLUGIN_MODULE, *(module for module, _ in BUILTIN_PLUGIN_MODULES)}
    features = []
    for info in list_plugins():
        if info.plugin in builtin:
            continue
        name = "PLUGIN_" + "".join(c if c.isalnum() else "_" for c in info.plugin.upper())
        features.append(Feature(name, True, f"plugin {info.describe()}"))
    return features


def feature_list() -> list[Feature]:
    """Every feature of this installation, checked now."""
    features = [Feature(name, _installed(module), doc) for name, (module, doc) in _COMPONENTS.items()]
    features += _cuda_features()
    features.append(Feature("DIST_KVSTORE", _installed("mxkit.kvstore") and _installed("ray"),
                            "distributed KVStore on Ray (pip install mxkit-kvstore[dist])"))
    features.append(Feature("PROFILER", _installed("mxkit.engine"), "the engine's profiler (mx.profiler)"))
    features += _plugin_features()
    features += [Feature(name, False, "an MXNet build flag with no mxkit counterpart") for name in _MXNET_BUILD_FLAGS
                 if name not in {f.name for f in features}]
    return features


class Features(OrderedDict[str, Any]):
    """Feature name to :class:`Feature`, made once per process (MXNet's singleton)."""

    _instance: Features | None = None
    _lock = threading.Lock()

    def __new__(cls) -> Features:
        with cls._lock:
            if cls._instance is None:
                instance = super().__new__(cls)
                OrderedDict.__init__(instance, [(f.name, f) for f in feature_list()])
                cls._instance = instance
        return cls._instance

    def __init__(self) -> None:  # filled once in __new__
        pass

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        """Whether ``feature_name`` (case-insensitive) is enabled.

        Raises
        ------
        MXKitError
            For a name that is not a feature, listing the known ones.
        """
        name = feature_name.upper()
        if name not in self:
            raise MXKitError(f"feature {feature_name!r} is unknown; known features are: {', '.join(self)}")
        return bool(self[name].enabled)

    @classmethod
    def refresh(cls) -> Features:
        """Check again (after installing a component or registering a plugin)."""
        with cls._lock:
            cls._instance = None
        return cls()


__all__ = ["Feature", "Features", "feature_list"]
