"""Old MXNet files: symbol JSON from MXNet 0.8/0.9/1.6 upgraded as MXNet 1.9.1 upgrades them
(references written by MXNet 1.9.1, see fixtures/legacy_json/make_legacy_fixtures.py), and
NDArray files in the pre-0.8 layout whose first word is ndim."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import FormatError

FIXTURES = Path(__file__).parent / "fixtures" / "legacy_json"
CASES = ["mxnet-0.8-symbol", "mxnet-0.9.3-symbol", "mxnet-1.6.0-symbol"]


def _by_name(graph):
    """Node name -> (op, attrs, inputs as (source name, output)): independent of node order and
    of the version element MXNet writes for mutable inputs."""
    nodes = graph["nodes"]
    return {node["name"]: (node["op"], node.get("attrs", {}),
                           [(nodes[raw[0]]["name"], raw[1]) for raw in node["inputs"]]) for node in nodes}


@pytest.mark.parametrize("case", CASES)
def test_upgrade_agrees_with_mxnet_1_9_1(case):
    ours = json.loads(mx.sym.load(str(FIXTURES / f"{case}.json")).tojson())
    reference = json.loads((FIXTURES / f"{case}.upgraded-by-mxnet-1.9.1.json").read_text())
    assert _by_name(ours) == _by_name(reference)
    assert [h[:2] for h in ours["heads"]] == [h[:2] for h in reference["heads"]]


def test_an_mxnet_0_8_network_is_usable_after_the_upgrade():
    net = mx.sym.load(str(FIXTURES / "mxnet-0.8-symbol.json"))
    assert net.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert net.get_internals()["fc1_weight"].attr("lr_mult") == "2.0"
    assert net.get_internals()["fc1_bias"].attr("wd_mult") == "0.5"  # moved from fc1's bias_wd_mult
    _arg_shapes, out_shapes, aux_shapes = net.infer_shape(data=(4, 7), softmax_label=(4,))
    # argmax's axis=-1 meant "over every element" before 0.9.5: one index comes out
    assert out_shapes == [(4, 10), (1,)] and aux_shapes == [(10,), (10,)]
    exe = net.simple_bind(mx.cpu(), data=(4, 7), softmax_label=(4,))
    exe.aux_dict["bn_moving_var"][:] = 1
    probabilities, classes = exe.forward(is_train=False, data=np.random.rand(4, 7))
    np.testing.assert_allclose(probabilities.asnumpy().sum(axis=1), 1.0, rtol=1e-5)
    assert classes.asnumpy().tolist() == [probabilities.asnumpy().argmax()]


def test_version_gates_each_upgrade():
    # 1.6.0 is past every structural upgrade: argmax keeps axis=-1 (it means the last axis since 0.9.5)
    net = mx.sym.load(str(FIXTURES / "mxnet-1.6.0-symbol.json"))
    assert net.attr("axis") == "-1"
    # 0.9.3 stored its auxiliary states already: none are added, initializers are (an explicit one is kept)
    inner = mx.sym.load(str(FIXTURES / "mxnet-0.9.3-symbol.json")).get_internals()
    assert inner["bn_moving_mean"].attr("__init__") == '["zero", {}]'
    assert inner["bn_moving_var"].attr("__init__") == '["constant", {"value": 2.0}]'
    assert inner["prelu_gamma"].attr("__init__") == '["Constant", {"value": 0.25}]'


def test_current_files_are_not_touched():
    x = mx.sym.Variable("x", lr_mult=2.0)
    net = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    text = net.tojson()
    assert json.loads(mx.sym.load_json(text).tojson()) == json.loads(text)


def test_bad_version_is_a_format_error():
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[0, 0, 0]],
             "attrs": {"mxnet_version": "1.9.1"}}
    with pytest.raises(FormatError, match=r"mxnet_version is '1\.9\.1'; expected \[\"int\", <version>\]"):
        mx.sym.load_json(json.dumps(graph))
    graph = {"nodes": [{"op": "null", "name": "x", "attr": ["lr_mult"], "inputs": []}], "heads": [[0, 0]]}
    with pytest.raises(FormatError, match=r"node 'x': 'attr' must be an object, got \['lr_mult'\]"):
        mx.sym.load_json(json.dumps(graph))


def _pre_08_record(array: np.ndarray, dev_type: int = 1) -> bytes:
    """MXNet before 0.8: u32 ndim, u32 dims, i32 device type and id, i32 dtype flag, data (no magic)."""
    flag = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 4}[array.dtype]
    return (struct.pack(f"<I{array.ndim}I", array.ndim, *array.shape) + struct.pack("<iii", dev_type, 0, flag)
            + array.astype(array.dtype.newbyteorder("<")).tobytes())


def _list_file(records: list[bytes], names: list[str]) -> bytes:
    body = struct.pack("<QQQ", 0x112, 0, len(records)) + b"".join(records) + struct.pack("<Q", len(names))
    return body + b"".join(struct.pack("<Q", len(n.encode())) + n.encode() for n in names)


def test_nd_load_reads_pre_0_8_files(tmp_path):
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    bias = np.array([1.5, -2.0], dtype=np.float64)
    path = tmp_path / "old.params"
    path.write_bytes(_list_file([_pre_08_record(weight), _pre_08_record(bias, dev_type=2)],
                                ["arg:fc_weight", "arg:fc_bias"]))
    loaded = mx.nd.load(str(path))
    assert sorted(loaded) == ["arg:fc_bias", "arg:fc_weight"]
    np.testing.assert_array_equal(loaded["arg:fc_weight"].asnumpy(), weight)
    assert loaded["arg:fc_bias"].dtype == np.float64 and loaded["arg:fc_bias"].context == mx.cpu(0)
    np.testing.assert_array_equal(loaded["arg:fc_bias"].asnumpy(), bias)


def test_nd_load_of_a_corrupt_pre_0_8_file_says_where(tmp_path):
    path = tmp_path / "bad.params"
    path.write_bytes(_list_file([struct.pack("<I", 77) + b"\0" * 16], []))
    with pytest.raises(FormatError, match=r"byte offset 24.*starts with 0x0000004D, which is neither a record magic"):
        mx.nd.load(str(path))
    path.write_bytes(_list_file([_pre_08_record(np.zeros(3, np.float32))], [])[:-12])
    with pytest.raises(FormatError, match=r"the data of .* \(shape \(3,\)\)"):
        mx.nd.load(str(path))


def _mxnet_python():
    interpreter = os.environ.get("MXKIT_MXNET_PYTHON")
    if not interpreter:
        pytest.skip("set MXKIT_MXNET_PYTHON to the interpreter of an MXNet 1.9.1 environment to run this check")
    return interpreter


def _run_mxnet(code: str, *args: str) -> str:
    result = subprocess.run([_mxnet_python(), "-c", code, *args], capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("case", CASES)
def test_a_live_mxnet_upgrades_each_file_as_we_do(case):
    code = "import json, sys, mxnet as mx; print(mx.sym.load(sys.argv[1]).tojson().replace('\\n', ''))"
    theirs = json.loads(_run_mxnet(code, str(FIXTURES / f"{case}.json")))
    ours = json.loads(mx.sym.load(str(FIXTURES / f"{case}.json")).tojson())
    assert _by_name(ours) == _by_name(theirs)


def test_a_live_mxnet_reads_our_pre_0_8_file_as_we_do(tmp_path):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 3)).astype(np.float32), np.arange(4, dtype=np.int32),
              rng.standard_normal((1, 2, 2)).astype(np.float64)]
    path = tmp_path / "pre08.params"
    path.write_bytes(_list_file([_pre_08_record(a) for a in arrays], []))
    code = ("import json, sys, mxnet as mx\n"
            "print(json.dumps([[a.dtype.__name__, a.asnumpy().tolist()] for a in mx.nd.load(sys.argv[1])]))")
    theirs = json.loads(_run_mxnet(code, str(path)))
    ours = mx.nd.load(str(path))
    assert [np.dtype(a.dtype).name for a in ours] == [dtype for dtype, _ in theirs]
    for mine, (_, values) in zip(ours, theirs):
        np.testing.assert_array_equal(mine.asnumpy(), np.array(values))
