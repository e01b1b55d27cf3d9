"""The fused RNN operator's LSTM with a projection (``projection_size``, LSTMP): forward against
MXNet 1.9.1's CPU operator (fixtures/make_lstmp_fixtures.py), every gradient against float64
finite differences (MXNet's CPU operator has no LSTMP backward), the packed layout, shapes and
the errors."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np
import pytest
from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops import _rnn_math as rnn_math
from mxkit.ndarray.ops.nn_rnn import rnn_param_size

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def nd():
    from mxkit import mx

    return mx.nd


def _cases():
    return sorted(json.loads((FIXTURES / "rnn_lstmp.json").read_text())["cases"].items())


@pytest.mark.parametrize("case,meta", _cases())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # float32 takes the CPU plugin's fused cell
def test_lstmp_forward_matches_mxnet(nd, case, meta, dtype):
    stored = np.load(FIXTURES / "rnn_lstmp.npz", allow_pickle=False)
    entries = {k.split("/", 1)[1]: stored[k] for k in stored.files if k.startswith(case + "/")}
    names = ["data", "parameters", "state", "state_cell"]
    outs = nd.RNN(*[nd.array(entries[f"arg_{n}"], dtype=dtype) for n in names], **meta)
    directions = 2 if meta["bidirectional"] else 1
    layers, hidden, projection = meta["num_layers"], meta["state_size"], meta["projection_size"]
    steps, batch = entries["arg_data"].shape[:2]
    assert [o.shape for o in outs] == [(steps, batch, directions * projection),
                                       (layers * directions, batch, projection),
                                       (layers * directions, batch, hidden)]
    for i, out in enumerate(outs):
        # float32 sums of at most ~10 products of numbers below 1, through tanh/sigmoid
        np.testing.assert_allclose(out.asnumpy(), entries[f"out_{i}"], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{case} output {i}")


def test_lstmp_training_forward_equals_inference_forward(nd):
    from mxkit.ndarray import autograd

    stored = np.load(FIXTURES / "rnn_lstmp.npz", allow_pickle=False)
    meta = dict(_cases())["lstmp_l2_bi"]
    args = [nd.array(stored[f"lstmp_l2_bi/arg_{n}"]) for n in ("data", "parameters", "state", "state_cell")]
    with autograd.record():
        outs = nd.RNN(*args, **meta)
    np.testing.assert_allclose(outs[0].asnumpy(), stored["lstmp_l2_bi/out_0"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstmp_gradients_match_float64_finite_differences(nd, bidirectional):
    from mxkit.ndarray import autograd

    rng = np.random.default_rng(5)
    steps, batch, features, hidden, projection, layers = 3, 2, 2, 3, 2, 2
    directions = 2 if bidirectional else 1
    params = {"mode": "lstm", "state_size": hidden, "num_layers": layers, "bidirectional": bidirectional,
              "state_outputs": True, "projection_size": projection}
    size = rnn_param_size("lstm", layers, features, hidden, bidirectional, projection)
    args = {"data": rng.uniform(-1, 1, (steps, batch, features)), "parameters": rng.uniform(-0.8, 0.8, size),
            "state": rng.uniform(-0.5, 0.5, (directions * layers, batch, projection)),
            "state_cell": rng.uniform(-0.5, 0.5, (directions * layers, batch, hidden))}
    heads = [rng.uniform(-1, 1, s) for s in [(steps, batch, directions * projection),
                                              (directions * layers, batch, projection),
                                              (directions * layers, batch, hidden)]]
    arrays = {n: nd.array(v, dtype=np.float64) for n, v in args.items()}
    for a in arrays.values():
        a.attach_grad()
    with autograd.record():
        outs = nd.RNN(*arrays.values(), **params)
    autograd.backward(list(outs), [nd.array(h, dtype=np.float64) for h in heads])

    def loss(values: dict) -> float:
        outs = nd.RNN(*[nd.array(v, dtype=np.float64) for v in values.values()], **params)
        return sum(float((o.asnumpy() * h).sum()) for o, h in zip(outs, heads))

    names = list(args)
    for position, name in enumerate(names):
        numeric = harness.numeric_gradient(lambda values: np.float64(loss(dict(zip(names, values)))),
                                           list(args.values()), position, 1.0)
        # central differences of a smooth function: O(eps^2) truncation, O(1e-16/eps) rounding
        np.testing.assert_allclose(arrays[name].grad.asnumpy(), numeric, rtol=1e-5, atol=1e-8,
                                   err_msg=f"d/d{name}")


def test_lstmp_packed_layout_puts_h2r_after_h2h_and_biases_last():
    hidden, projection, features = 3, 2, 5
    size = rnn_param_size("lstm", 2, features, hidden, True, projection)
    # MXNet's GetRnnParamSize: (in + P + 2) * 4H per direction of each layer, plus P*H each
    assert size == 2 * (features + projection + 2) * 12 + 2 * (2 * projection + projection + 2) * 12 + 4 * 6
    flat = np.arange(size, dtype=np.float64)
    layers = rnn_math.unpack(flat, "lstm", 2, features, hidden, 2, projection)
    first = layers[0][0]
    assert first.w_i2h.shape == (12, 5) and first.w_h2h.shape == (12, 2) and first.w_h2r.shape == (2, 3)
    assert layers[1][0].w_i2h.shape == (12, 4)  # both directions' projections feed layer 1
    assert first.w_h2h[0, 0] == 60 and first.w_h2r[0, 0] == 60 + 24
    assert layers[0][1].w_i2h[0, 0] == 60 + 24 + 6
    assert layers[1][1].w_h2r[-1, -1] == size - 4 * 24 - 1
    assert first.b_i2h[0] == size - 4 * 24 and layers[1][1].b_h2h[-1] == size - 1


def test_symbol_infers_lstmp_shapes():
    from mxkit import mx

    sym = mx.sym.RNN(mx.sym.var("data"), state_size=4, num_layers=2, mode="lstm", bidirectional=True,
                     projection_size=3, state_outputs=True, name="rnn")
    assert sym.list_arguments() == ["data", "rnn_parameters", "rnn_state", "rnn_state_cell"]
    arg_shapes, out_shapes, _ = sym.infer_shape(data=(7, 2, 5))
    assert arg_shapes == [(7, 2, 5), (rnn_param_size("lstm", 2, 5, 4, True, 3),), (4, 2, 3), (4, 2, 4)]
    assert out_shapes == [(7, 2, 6), (4, 2, 3), (4, 2, 4)]


def test_bad_projections_fail_clearly(nd):
    size = rnn_param_size("lstm", 1, 2, 3, False, 2)
    data, flat = nd.zeros((3, 1, 2)), nd.zeros((size,))
    with pytest.raises(ShapeError, match="projection_size=2 is for mode='lstm' only"):
        nd.RNN(data, nd.zeros((rnn_param_size("gru", 1, 2, 3),)), nd.zeros((1, 1, 3)), mode="gru", state_size=3,
               num_layers=1, projection_size=2)
    with pytest.raises(ShapeError, match=r"projection_size=4 must be in \[1, state_size=3\]"):
        nd.RNN(data, flat, nd.zeros((1, 1, 4)), nd.zeros((1, 1, 3)), mode="lstm", state_size=3, num_layers=1,
               projection_size=4)
    with pytest.raises(ShapeError, match=r"state has shape \(1, 1, 3\), expected \(1, 1, 2\).*projection_size"):
        nd.RNN(data, flat, nd.zeros((1, 1, 3)), nd.zeros((1, 1, 3)), mode="lstm", state_size=3, num_layers=1,
               projection_size=2)
    with pytest.raises(ShapeError, match=r"state_cell has shape \(1, 1, 2\), expected \(1, 1, 3\)"):
        nd.RNN(data, flat, nd.zeros((1, 1, 2)), nd.zeros((1, 1, 2)), mode="lstm", state_size=3, num_layers=1,
               projection_size=2)
    with pytest.raises(ShapeError, match=r"G\*H\*\(in \+ P\) \+ 2\*G\*H \+ P\*H"):
        nd.RNN(data, nd.zeros((size - 1,)), nd.zeros((1, 1, 2)), nd.zeros((1, 1, 3)), mode="lstm", state_size=3,
               num_layers=1, projection_size=2)
