"""Every bad input fails with a clear mxkit error naming what was wrong and what would be right."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import Constant, GluonError, Parameter, ParameterDict, SymbolBlock, Trainer, data, nn, utils
from mxkit.gluon import loss as gloss
from mxkit.gluon.model_zoo import vision


def test_parameter_errors(tmp_path):
    with pytest.raises(GluonError, match=r"shape \(0, 3\) is not fully known"):
        Parameter("w", shape=(0, 3)).initialize()
    with pytest.raises(GluonError, match="ctx must be a Context or a non-empty list"):
        Parameter("w", shape=(2,)).initialize(ctx=["cpu"])
    with pytest.raises(GluonError, match="has not been initialized; call initialize"):
        Parameter("w", shape=(2,)).data()
    with pytest.raises(GluonError, match="not initialized on cpu\\(3\\)"):
        p = Parameter("w", shape=(2,))
        p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
        p.data(mx.cpu(3))
    params = ParameterDict("net_")
    params.get("w", shape=(2,), dtype="float32")
    with pytest.raises(GluonError, match="exists with dtype float32, asked for float64"):
        params.get("w", dtype="float64")
    with pytest.raises(GluonError, match=r"exists with lr_mult=1\.0, asked for 2\.0"):
        params.get("w", lr_mult=2.0)
    with pytest.raises(GluonError, match="give its value to create it"):
        params.get_constant("c")
    with pytest.raises(GluonError, match="is not a Constant"):
        params.get_constant("w")
    params.initialize()
    with pytest.raises(GluonError, match="does not start with it"):
        params.save(str(tmp_path / "p.params"), strip_prefix="other_")
    mx.nd.save(str(tmp_path / "list.params"), [mx.nd.ones((1,))])
    with pytest.raises(GluonError, match="list of arrays, not named parameters"):
        params.load(str(tmp_path / "list.params"))
    with pytest.raises(GluonError, match="unnamed list of arrays"):
        nn.Dense(1).load_parameters(str(tmp_path / "list.params"))


def test_constant_is_not_trained():
    const = Constant("c", [[1.0, 2.0]])
    const.initialize()
    assert const.grad_req == "null"
    np.testing.assert_array_equal(const.data().asnumpy(), [[1.0, 2.0]])


def test_layer_argument_errors():
    with pytest.raises(GluonError, match=r"Dropout rate must be in \[0, 1\]"):
        nn.Dropout(1.5)
    with pytest.raises(GluonError, match="slope alpha must be no less than 0"):
        nn.LeakyReLU(-0.1)
    with pytest.raises(GluonError, match="kernel_size must be an int or a tuple of 2 ints"):
        nn.Conv2D(2, (3, 3, 3))
    with pytest.raises(GluonError, match=r"mx\.nd has no function 'no_such_op'"):
        nn.Lambda("no_such_op")
    with pytest.raises(GluonError, match="HybridLambda takes a function"):
        nn.HybridLambda(3)
    with pytest.raises(GluonError, match="label_format must be 'signed' or 'binary'"):
        gloss.LogisticLoss(label_format="ternary")


def test_trainer_argument_errors():
    net = nn.Dense(1, in_units=1)
    net.initialize()
    with pytest.raises(GluonError, match="item 0 is int"):
        Trainer([1], "sgd")
    with pytest.raises(GluonError, match="takes a ParameterDict, a dict or a list"):
        Trainer(net.weight, "sgd")
    with pytest.raises(GluonError, match="optimizer_params must be None"):
        Trainer(net.collect_params(), mx.optimizer.SGD(), {"learning_rate": 0.1})
    with pytest.raises(GluonError, match=r"update_on_kvstore=True\) needs a store"):
        Trainer(net.collect_params(), "sgd", update_on_kvstore=True).step(1)  # one device: no store
    with pytest.raises(GluonError, match="no step has run yet"):
        Trainer(net.collect_params(), "sgd").save_states("unused")


def test_symbol_block_and_model_zoo_errors():
    with pytest.raises(GluonError, match="must be variables"):
        SymbolBlock(mx.sym.var("x") + 1, mx.sym.var("x") * 2)
    with pytest.raises(GluonError, match=r"choose one of \[18, 34, 50, 101, 152\]"):
        vision.get_resnet(1, 19)
    with pytest.raises(GluonError, match="version 1 or 2"):
        vision.get_resnet(3, 18)


def test_data_and_utils_errors():
    with pytest.raises(GluonError, match="batch_size must be positive"):
        data.BatchSampler(data.SequentialSampler(3), 0)
    with pytest.raises(GluonError, match="shuffle must not be given with a sampler"):
        data.DataLoader(data.SimpleDataset([1]), batch_size=1, shuffle=True, sampler=data.SequentialSampler(1))
    with pytest.raises(mx.MXKitError, match="too many slices"):
        utils.split_data(mx.nd.ones((2, 3)), 3, even_split=False)
    with pytest.raises(mx.MXKitError, match="cannot be evenly split into 4 slices"):
        utils.split_data(mx.nd.ones((6, 3)), 4)
