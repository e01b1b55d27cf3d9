"""Symbol construction: naming, listing, attributes, grouping, indexing, composition."""

import copy
import json

import pytest
from mxkit import symbol as sym
from mxkit.core.errors import MXKitError
from mxkit.ndarray.params import ParamError
from mxkit.symbol.attribute import AttrScope
from mxkit.symbol.name import NameManager, Prefix
from mxkit.symbol.symbol import SymbolError


def test_implicit_variables_and_auto_names_follow_mxnet():
    with NameManager():
        data = sym.Variable("data")
        first = sym.dot(data)
        second = sym.dot(first)
    assert first.name == "dot0" and second.name == "dot1"
    assert second.list_arguments() == ["data", "dot0_rhs", "dot1_rhs"]
    assert second.list_outputs() == ["dot1_output"]


def test_name_counters_are_per_manager_and_prefix_applies_to_every_name():
    with NameManager():
        a = sym.relu(sym.Variable("x"))
    with NameManager():
        b = sym.relu(sym.Variable("x"))
    assert a.name == b.name == "relu0"
    with Prefix("net_"):
        c = sym.dot(sym.Variable("x"), name="fc")
        d = sym.relu(c)
    assert c.list_arguments() == ["x", "net_fc_rhs"]
    assert d.name == "net_relu0"


def test_arithmetic_nodes_are_named_like_mxnet_internal_ops():
    with NameManager():
        x = sym.Variable("x")
        y = 1 - ((x * 2 + x) - 1)
        z = 2 / (y / x)
    names = z.get_internals().list_outputs()
    assert names == ["x", "_mulscalar0_output", "_plus0_output", "_minusscalar0_output",
                     "_rminusscalar0_output", "_div0_output", "_rdivscalar0_output"]
    assert y.attr("scalar") == "1"


def test_list_inputs_and_auxiliary_states(require_ops):
    require_ops("BatchNorm")
    data = sym.Variable("data")
    bn = sym.BatchNorm(data, name="bn")
    assert bn.list_arguments() == ["data", "bn_gamma", "bn_beta"]
    assert bn.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert bn.list_inputs() == ["data", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var"]


def test_group_indexing_by_number_and_name():
    data = sym.Variable("data")
    parts = sym.split(data, num_outputs=3, axis=1, name="parts")
    assert len(parts) == 3
    assert parts.list_outputs() == ["parts_output0", "parts_output1", "parts_output2"]
    assert parts[1].list_outputs() == ["parts_output1"]
    assert parts["parts_output2"].list_outputs() == ["parts_output2"]
    assert parts[-1].list_outputs() == ["parts_output2"]
    group = sym.Group([parts[0], data])
    assert group.list_outputs() == ["parts_output0", "data"]
    assert [s.list_outputs()[0] for s in group] == ["parts_output0", "data"]
    assert repr(group) == "<Symbol group [parts_output0, data]>"
    assert repr(data) == "<Symbol data>"


def test_bad_indexing_and_grouping_say_what_is_available():
    parts = sym.split(sym.Variable("d"), num_outputs=2, name="p")
    with pytest.raises(SymbolError, match=r"out of range.*2 outputs.*p_output0, p_output1"):
        parts[2]
    with pytest.raises(SymbolError, match=r"no output named 'nope'.*p_output0"):
        parts["nope"]
    with pytest.raises(SymbolError, match="int or an output name"):
        parts[1.5]
    with pytest.raises(SymbolError, match="empty list"):
        sym.Group([])
    with pytest.raises(SymbolError, match="element 1 is int"):
        sym.Group([parts, 3])


def test_internals_and_children():
    data = sym.Variable("data")
    hidden = sym.relu(sym.dot(data, sym.Variable("w"), name="affine"), name="hidden")
    out = sym.sum(hidden, name="total")
    internals = out.get_internals()
    assert internals.list_outputs() == ["data", "w", "affine_output", "hidden_output", "total_output"]
    feature = internals["hidden_output"]
    assert feature.list_arguments() == ["data", "w"]
    assert out.get_children().list_outputs() == ["hidden_output"]
    assert hidden.get_children().list_outputs() == ["affine_output"]
    assert data.get_children() is None


def test_attributes_variables_scopes_and_attr_dict():
    weight = sym.Variable("w", shape=(3, 4), dtype="float16", lr_mult=2, wd_mult=0.5, init="zeros",
                          attr={"note": "x"})
    assert weight.attr("__shape__") == "(3, 4)"
    assert weight.attr("lr_mult") == "2" and weight.attr("wd_mult") == "0.5"
    assert weight.attr("__dtype__") == "2"  # MXNet's flag of float16
    assert weight.attr("note") == "x" and weight.attr("missing") is None
    with AttrScope(ctx_group="stage1"):
        with AttrScope(lr_mult="0.1"):
            out = sym.dot(sym.Variable("data"), weight, name="fc")
    assert out.attr("ctx_group") == "stage1" and out.attr("lr_mult") == "0.1"
    # hidden keys are stored dunder and listed under both names, as MXNet lists them
    assert out.list_attr() == {"__ctx_group__": "stage1", "__lr_mult__": "0.1", "ctx_group": "stage1",
                               "lr_mult": "0.1"}
    everything = out.attr_dict()
    assert everything["fc"]["__ctx_group__"] == "stage1"
    assert everything["w"]["__lr_mult__"] == everything["w"]["lr_mult"] == "2"
    assert everything["w"]["note"] == "x"  # a variable's other attributes are stored as given
    assert weight.tojson().count('"note": "x"') == 1
    assert "fc$__ctx_group__" in out.list_attr(recursive=True)


def test_bad_attributes_and_variables_are_rejected_clearly():
    with pytest.raises(MXKitError, match=r"ctx_group=1 must be a string"):
        AttrScope(ctx_group=1)
    with pytest.raises(SymbolError, match=r"'color'.*'__color__'"):
        sym.Variable("v", color="red")
    with pytest.raises(SymbolError, match="non-empty string name"):
        sym.Variable("")
    with pytest.raises(SymbolError, match="unknown storage type 'csc'"):
        sym.Variable("v", stype="csc")
    assert sym.Variable("v", stype="csr").attr("__storage_type__") == "2"


def test_operator_creation_errors_name_the_problem():
    data = sym.Variable("data")
    with pytest.raises(SymbolError, match=r"positional argument 1 is int"):
        sym.dot(data, 3)
    with pytest.raises(SymbolError, match=r"'weight' is not an input; its inputs are: lhs, rhs"):
        sym.dot(data, weight=data)
    with pytest.raises(SymbolError, match=r"got 3 input symbols.*takes 2"):
        sym.dot(data, data, data)
    with pytest.raises(ParamError, match=r"num_outputs"):
        sym.split(data, axis=1)
    with pytest.raises(SymbolError, match=r"one output.*2 outputs"):
        sym.relu(sym.split(data, num_outputs=2))
    with pytest.raises(AttributeError, match="no operator"):
        getattr(sym, "NoSuchOperator")  # noqa: B009


def test_composition_substitutes_variables_and_leaves_the_original():
    data = sym.Variable("data")
    net = sym.relu(sym.dot(data, sym.Variable("w"), name="fc"), name="act")
    source = sym.tanh(sym.Variable("x"), name="pre")
    composed = net(data=source)
    assert composed.list_arguments() == ["x", "w"]
    assert net.list_arguments() == ["data", "w"]
    positional = net(source)
    assert positional.list_arguments() == ["x", "w"]
    with pytest.raises(SymbolError, match=r"'nope' is not an argument.*data, w"):
        net(nope=source)


def test_copy_is_deep():
    data = sym.Variable("data")
    net = sym.relu(data, name="act")
    clone = copy.copy(net)
    clone._set_attr(mark="1")
    assert clone.attr("mark") == "1" and net.attr("mark") is None
    assert clone.tojson() != net.tojson()


def test_variadic_operator_counts_its_inputs():
    a, b, c = (sym.Variable(n) for n in "abc")
    joined = sym.Concat(a, b, c, dim=1, name="cat")
    assert joined.list_arguments() == ["a", "b", "c"]
    assert joined.attr("num_args") == "3"


def test_fluent_methods_create_operator_nodes():
    x = sym.Variable("x")
    out = x.reshape(shape=(0, 2, -1)).sum(axis=2).astype("float64").flatten()
    assert out.infer_shape(x=(3, 8))[1] == [(3, 2)]
    assert out.infer_type(x="float32")[1][0].__name__ == "float64"
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        getattr(x, "nonexistent")  # noqa: B009


def test_contrib_operators_build_under_their_short_names_and_unknown_ones_say_so():
    net = sym.contrib.AdaptiveAvgPooling2D(sym.Variable("data"), output_size=(2, 3), name="pool")
    assert net.infer_shape(data=(1, 4, 7, 9))[1] == [(1, 4, 2, 3)]
    assert [node["op"] for node in json.loads(net.tojson())["nodes"]] == ["null", "_contrib_AdaptiveAvgPooling2D"]
    with pytest.raises(AttributeError, match="_contrib_NoSuchThing"):
        sym.contrib.NoSuchThing  # noqa: B018
