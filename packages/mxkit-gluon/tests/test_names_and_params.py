"""Block names, parameters and their files, against MXNet 1.9.1 (tests/fixtures/make_mxnet_fixtures.py)."""

import json

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, nn
from mxkit.gluon.model_zoo import vision
from mxkit.gluon.parameter import DeferredInitializationError, Parameter


@pytest.fixture(scope="module")
def names(request):
    from pathlib import Path

    return json.loads((Path(__file__).parent / "fixtures" / "names.json").read_text())


def test_top_level_prefixes_count_like_mxnet(names, fresh_names):
    prefixes = [nn.Dense(2).prefix, nn.Dense(2).prefix, nn.Conv2D(2, 3).prefix, nn.HybridSequential().prefix,
                nn.Activation("relu").prefix, nn.BatchNorm().prefix, nn.MaxPool2D().prefix]
    assert prefixes == names["top_level_prefixes"]


def test_hybridsequential_names(names, fresh_names):
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(4, 3, activation="relu"), nn.BatchNorm(), nn.MaxPool2D(), nn.Dense(8, activation="relu"),
                nn.Dropout(0.5), nn.Dense(3))
    expected = names["hybridsequential"]
    assert list(net.collect_params().keys()) == expected["params"]
    assert list(net._collect_params_with_prefix()) == expected["structural"]
    assert list(net.collect_params(".*weight").keys()) == expected["select"]


def test_nested_blocks_with_explicit_prefixes(names, fresh_names):
    class Nested(mx.gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.encoder = nn.HybridSequential(prefix="enc_")
                with self.encoder.name_scope():
                    self.encoder.add(nn.Dense(4), nn.Dense(4))
                self.head = nn.Dense(2, prefix="head_")
                self.scale = self.params.get("scale", shape=(1,))

        def hybrid_forward(self, F, x, scale):
            return F.broadcast_mul(self.head(self.encoder(x)), scale)

    nested = Nested()
    assert list(nested.collect_params().keys()) == names["nested"]["params"]
    assert list(nested._collect_params_with_prefix()) == names["nested"]["structural"]


@pytest.mark.parametrize("model", ["resnet18_v1", "resnet50_v1"])
def test_model_zoo_resnet_names(names, fresh_names, model):
    net = vision.get_model(model, classes=10)
    assert list(net.collect_params().keys()) == names[model]["params"]
    assert list(net._collect_params_with_prefix()) == names[model]["structural"]


def test_deferred_initialisation_fills_shapes_at_first_forward():
    net = nn.Dense(3)
    net.initialize()
    with pytest.raises(DeferredInitializationError, match="inferred at the first forward"):
        net.weight.data()
    net(mx.nd.ones((2, 5)))
    assert net.weight.shape == (3, 5)
    assert net.weight.data().shape == (3, 5)
    np.testing.assert_array_equal(net.bias.data().asnumpy(), np.zeros(3))  # bias_initializer='zeros'


def test_uninitialised_parameter_says_so():
    net = nn.Dense(3, in_units=2)
    with pytest.raises(GluonError, match="has not been initialized"):
        net(mx.nd.ones((1, 2)))


def test_incompatible_shape_is_refused():
    param = Parameter("w", shape=(3, 0))
    with pytest.raises(mx.MXKitError, match=r"incompatible with its declared shape \(3, 0\)"):
        param.shape = (4, 2)


def test_grad_req_lr_wd_mult_and_zero_grad():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(GluonError, match="grad_req must be one of"):
        net.weight.grad_req = "sometimes"
    net.collect_params().setattr("lr_mult", 0.5)
    assert net.weight.lr_mult == net.bias.lr_mult == 0.5
    x = mx.nd.ones((4, 3))
    with mx.autograd.record():
        y = net(x)
    y.backward()
    assert np.abs(net.weight.grad().asnumpy()).sum() > 0
    net.collect_params().zero_grad()
    assert np.abs(net.weight.grad().asnumpy()).sum() == 0
    net.bias.grad_req = "null"
    with pytest.raises(GluonError, match="grad_req is 'null'"):
        net.bias.grad()


def test_grad_req_add_accumulates_over_two_backward_passes():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.collect_params().setattr("grad_req", "add")
    x = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    for _ in range(2):
        with mx.autograd.record():
            y = net(x)
        y.backward()
    # d(sum y)/dW = column sums of x, twice
    np.testing.assert_allclose(net.weight.grad().asnumpy(), 2 * np.tile(x.asnumpy().sum(0), (2, 1)), rtol=1e-6)


def test_initialize_with_an_initializer_and_several_contexts():
    net = nn.Dense(4, in_units=3)
    net.initialize(mx.init.Constant(0.25), ctx=[mx.cpu(0), mx.cpu(1)])
    assert [str(c) for c in net.weight.list_ctx()] == ["cpu(0)", "cpu(1)"]
    for value in net.weight.list_data():
        np.testing.assert_array_equal(value.asnumpy(), np.full((4, 3), 0.25, np.float32))
    np.testing.assert_array_equal(net.weight.data(mx.cpu(1)).asnumpy(), np.full((4, 3), 0.25, np.float32))
    outs = [net(mx.nd.ones((2, 3), ctx=ctx)) for ctx in (mx.cpu(0), mx.cpu(1))]
    assert [str(o.context) for o in outs] == ["cpu(0)", "cpu(1)"]


def test_cast_changes_parameter_dtypes():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.cast("float64")
    assert net.weight.dtype == "float64"
    assert net.weight.data().dtype == np.float64
    assert net(mx.nd.ones((1, 3), dtype="float64")).dtype == np.float64


def test_load_parameters_written_by_mxnet(fixture_path):
    from gluon_testing_nets import small_net

    net = small_net()
    net.load_parameters(fixture_path("small_net.params"))
    reference = np.load(fixture_path("small_net.npz"))
    out = net(mx.nd.array(reference["x"]))
    np.testing.assert_allclose(out.asnumpy(), reference["out"], rtol=1e-5, atol=1e-6)


def test_save_parameters_is_byte_identical_to_mxnet(fixture_path, tmp_path):
    from gluon_testing_nets import small_net

    net = small_net()
    net.load_parameters(fixture_path("small_net.params"))
    net.save_parameters(str(tmp_path / "again.params"))
    with open(fixture_path("small_net.params"), "rb") as f:
        assert (tmp_path / "again.params").read_bytes() == f.read()


def test_load_parameters_missing_extra_and_dtype(fixture_path, tmp_path):
    from gluon_testing_nets import small_net

    net = small_net()
    net.add(nn.Dense(2))
    with pytest.raises(GluonError, match=r"parameter '6.weight' is missing.*allow_missing=True"):
        net.load_parameters(fixture_path("small_net.params"))
    net.load_parameters(fixture_path("small_net.params"), allow_missing=True)
    smaller = nn.HybridSequential()
    smaller.add(nn.Conv2D(3, 3, padding=1))
    with pytest.raises(GluonError, match=r"'1.gamma'.*not present.*ignore_extra=True"):
        smaller.load_parameters(fixture_path("small_net.params"))
    smaller.load_parameters(fixture_path("small_net.params"), ignore_extra=True)
    doubles = small_net()
    doubles.cast("float64")
    with pytest.raises(GluonError, match="cast_dtype=True"):
        doubles.load_parameters(fixture_path("small_net.params"))
    doubles.load_parameters(fixture_path("small_net.params"), cast_dtype=True)
    assert doubles[0].weight.data().dtype == np.float64


def test_load_parameters_shape_mismatch_is_an_error(fixture_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(5, 3, padding=1))
    with pytest.raises(mx.MXKitError, match=r"its shape is \(5, 0, 3, 3\), the file has \(3, 2, 3, 3\)"):
        net.load_parameters(fixture_path("small_net.params"), ignore_extra=True)


def test_pretrained_without_a_file_fails_clearly(tmp_path):
    with pytest.raises(GluonError, match=r"resnet18_v1\.params.*downloads nothing"):
        vision.get_model("resnet18_v1", pretrained=True, root=str(tmp_path))
    with pytest.raises(GluonError, match="not in the model zoo"):
        vision.get_model("resnet1000")


def test_pretrained_loads_a_local_file(tmp_path, fresh_names):
    net = vision.get_model("mlp", hidden=(4,), classes=2)
    net.initialize()
    net(mx.nd.ones((1, 3)))
    net.save_parameters(str(tmp_path / "mlp.params"))
    again = vision.get_model("mlp", hidden=(4,), classes=2, pretrained=True, root=str(tmp_path))
    np.testing.assert_array_equal(again[0].weight.data().asnumpy(), net[0].weight.data().asnumpy())


def test_row_sparse_parameters_are_read_by_rows_through_a_trainer(tmp_path):
    from mxkit.gluon import ParameterDict, Trainer

    params = ParameterDict("net_")
    params.get("dense", shape=(4, 3))
    rows = params.get("rows", shape=(5, 3), stype="row_sparse", grad_stype="row_sparse")
    params.initialize(mx.init.Uniform(1.0), ctx=[mx.cpu(0), mx.cpu(1)])
    with pytest.raises(GluonError, match="read it with row_sparse_data"):
        rows.data()
    with pytest.raises(GluonError, match="read it with row_sparse_data"):
        rows.list_data()
    with pytest.raises(GluonError, match="no Trainer was created with it"):
        rows.row_sparse_data(mx.nd.array([0, 2]))
    with pytest.raises(GluonError, match="row_sparse_data\\(\\) is for stype='row_sparse'"):
        params["net_dense"].row_sparse_data(mx.nd.array([0]))
    trainer = Trainer(params, "sgd")
    with pytest.raises(GluonError, match="already has a Trainer"):
        Trainer([rows], "sgd")
    assert rows._trainer is trainer
    value = rows.list_row_sparse_data(mx.nd.array([0, 3]))[0].tostype("default").asnumpy()
    picked = rows.row_sparse_data(mx.nd.array([3, 0], ctx=mx.cpu(1)))
    assert picked.stype == "row_sparse" and picked.context == mx.cpu(1) and picked.shape == (5, 3)
    np.testing.assert_array_equal(picked.asnumpy(), value)
    assert not value[[1, 2, 4]].any() and value[[0, 3]].all()
    assert rows.var().attr("__storage_type__") == "1"
    # saved as a row_sparse record (as MXNet saves it); loads into a dense parameter too
    params.save(str(tmp_path / "p.params"))
    dense = ParameterDict("net_")
    dense.get("dense", shape=(4, 3))
    dense.get("rows", shape=(5, 3))
    dense.load(str(tmp_path / "p.params"), ctx=mx.cpu(1))
    np.testing.assert_array_equal(dense["net_rows"].data(mx.cpu(1)).asnumpy()[[0, 3]], value[[0, 3]])
    with pytest.raises(GluonError, match="stype must be 'default' or 'row_sparse', got 'invalid'"):
        ParameterDict("x_").get("w", shape=(2,), stype="invalid")
    with pytest.raises(GluonError, match="'csr' is not provided for parameters"):
        ParameterDict("x_").get("w", shape=(2,), grad_stype="csr")
