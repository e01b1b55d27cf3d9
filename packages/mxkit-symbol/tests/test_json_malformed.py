"""Malformed symbol JSON always ends in a FormatError (an unknown operator name in an
UnknownOperatorError), never a raw Python error: hand-made cases, then fuzzing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit import symbol as sym
from mxkit.core.errors import FormatError
from mxkit.ndarray.registry import UnknownOperatorError
from mxkit.symbol.json_format import from_json, load

EXPECTED = (FormatError, UnknownOperatorError)


def valid_json() -> str:
    data = sym.Variable("data")
    net = sym.Activation(sym.FullyConnected(data, num_hidden=4, name="fc"), act_type="relu", name="relu")
    return net.tojson()


@pytest.mark.parametrize(("text", "message"), [
    ('{"nodes":[1],"heads":[]}', "node 0 must be an object"),
    ('{"nodes":[],"heads":5}', "'heads' must be a list"),
    ("[" * 100_000 + "]" * 100_000, "nests arrays or objects deeper"),
    ('{"nodes":[],"heads":[[' + "1" * 100_000 + ",0,0]]}", "holds a value that cannot be read"),
    ('{"nodes":[{"op":"null","name":"x","inputs":5}],"heads":[[0,0,0]]}', "'inputs' must be a list"),
    ('{"nodes":[{"op":"null","name":3}],"heads":[]}', "needs 'op' and 'name' strings"),
    ('{"nodes":[{"op":"null","name":"x"}],"heads":[[0,0,0]], "arg_nodes": 3}', "'arg_nodes' must be a list"),
    ('{"nodes": [', "does not parse at offset 11"),
])
def test_malformed_symbol_json_is_a_format_error(text, message):
    with pytest.raises(FormatError, match=message):
        from_json(text)


def test_a_file_is_named_and_invalid_utf8_is_a_format_error(tmp_path):
    path = tmp_path / "bad-symbol.json"
    path.write_bytes(b'{"nodes": [], "heads": "\xff\xfe"}')
    with pytest.raises(FormatError, match=r"bad-symbol.json' is not UTF-8 text \(byte offset 24"):
        load(str(path))
    path.write_text('{"nodes":[1],"heads":[]}')
    with pytest.raises(FormatError, match=r"symbol file .*bad-symbol.json': symbol JSON node 0 must be"):
        load(str(path))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_byte_mutations_never_escape_as_other_errors(data):
    raw = bytearray(valid_json().encode())
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] = data.draw(st.sampled_from(b'{}[]",:0123456789-eE.anx \x00\xff'))
    try:
        from_json(raw.decode("utf-8", errors="replace"))
    except EXPECTED:
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["op", "name", "inputs", "attrs", "param", "attr", "heads", "nodes", "arg_nodes"]),
        children, max_size=4),
    max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=json_values, heads=json_values, extra=st.dictionaries(st.sampled_from(["arg_nodes", "attrs",
                                                                                    "node_row_ptr"]), json_values))
def test_random_layouts_never_escape_as_other_errors(nodes, heads, extra):
    try:
        from_json(json.dumps({"nodes": nodes, "heads": heads, **extra}))
    except EXPECTED:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_field_swaps_in_a_real_graph_never_escape(data):
    graph = json.loads(valid_json())
    node = data.draw(st.integers(0, len(graph["nodes"]) - 1))
    field = data.draw(st.sampled_from(["op", "name", "inputs", "attrs"]))
    graph["nodes"][node][field] = data.draw(json_values)
    try:
        from_json(json.dumps(graph))
    except EXPECTED:
        pass
