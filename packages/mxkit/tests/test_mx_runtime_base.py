"""mx.base (MXNetError, py_str, the version), mx.context, mx.name, mx.attribute and mx.runtime.Features."""

import subprocess
import sys
from importlib import metadata

import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError, ShapeError


def test_mxnet_error_catches_mxkit_errors():
    with pytest.raises(mx.base.MXNetError):
        mx.nd.ones((2, 3)) + mx.nd.ones((4, 5))
    assert issubclass(ShapeError, mx.base.MXNetError) and mx.MXNetError is mx.base.MXNetError


def test_py_str_and_version():
    assert mx.base.py_str(b"caf\xc3\xa9") == "café" and mx.base.py_str("x") == "x"
    with pytest.raises(MXKitError, match=r"py_str expects bytes .* got int 3"):
        mx.base.py_str(3)
    assert mx.__version__ == metadata.version("mxkit")
    assert isinstance("s", mx.base.string_types)


def test_context_module_names():
    assert mx.context.Context("cpu", 1) == mx.cpu(1)
    assert mx.context.current_context() == mx.cpu(0)
    assert mx.context.num_gpus() >= 0


def test_name_manager_and_prefix_and_attr_scope():
    with mx.name.Prefix("net_"):
        fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    assert fc.name == "net_fc" and "net_fc_weight" in fc.list_arguments()
    with mx.name.NameManager():
        first = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu")
        second = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu")
    assert (first.name, second.name) == ("activation0", "activation1")
    with mx.attribute.AttrScope(ctx_group="stage1"):
        grouped = mx.sym.Variable("w")
    assert grouped.attr("ctx_group") == "stage1"


def test_features_list_components_and_cuda_follows_num_gpus():
    features = mx.runtime.Features()
    assert features is mx.runtime.Features()  # one per process, as MXNet's
    for name in ("NDARRAY", "SYMBOL", "ENGINE", "MEMPLAN", "KVSTORE", "IO", "TRAIN", "CPU"):
        assert features.is_enabled(name), name
    assert features.is_enabled("cuda") == (mx.context.num_gpus() > 0)
    if not features.is_enabled("CUDA"):
        assert not features.is_enabled("CUDNN")
    assert repr(features["NDARRAY"]) == "✔ NDARRAY"
    with pytest.raises(MXKitError, match="feature 'SSE42' is unknown; known features are: ENGINE, NDARRAY"):
        features.is_enabled("SSE42")
    # MXNet's build flags are known and off: code written for MXNet picks its default path
    assert features.is_enabled("PROFILER")
    for flag in ("INT64_TENSOR_SIZE", "MKLDNN", "NCCL", "TENSORRT", "BLAS_OPEN", "CPU_AVX2", "SIGNAL_HANDLER"):
        assert not features.is_enabled(flag), flag


def test_features_name_installed_and_hand_registered_plugins():
    from mxkit.core import hookimpl, plugins

    class Extra:
        @hookimpl
        def mxkit_engines(self):
            return []

    name = plugins.register_plugin(Extra(), name="extra-engines")
    try:
        features = mx.runtime.Features.refresh()
        assert features.is_enabled("PLUGIN_EXTRA_ENGINES")
        assert "extra-engines" in features["PLUGIN_EXTRA_ENGINES"].description
    finally:
        plugins.unregister_plugin(name)
    assert "PLUGIN_EXTRA_ENGINES" not in mx.runtime.Features.refresh()


def test_features_without_a_component():
    # a fresh interpreter where mxkit.kvstore cannot be imported: KVSTORE and DIST_KVSTORE are off
    code = ("import sys; sys.modules['mxkit.kvstore'] = None\n"
            "import importlib.util as u; real = u.find_spec\n"
            "u.find_spec = lambda n, *a: None if n.startswith('mxkit.kvstore') else real(n, *a)\n"
            "from mxkit import mx; f = mx.runtime.Features()\n"
            "print(f.is_enabled('KVSTORE'), f.is_enabled('DIST_KVSTORE'), f.is_enabled('NDARRAY'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


def test_lazy_names_resolve():
    assert mx.test_utils.assert_almost_equal is not None
    assert "test_utils" in dir(mx) and "runtime" in dir(mx)
