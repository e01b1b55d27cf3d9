"""The fused-elementwise program: validation, its C and numexpr renderings, and both CPU kernels
(numexpr and the ``out=`` ufunc sequence) against hand-written numpy."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.ndarray.ops import fused_elemwise
from mxkit.ndarray.ops._fused_program import (
    PRIMITIVES,
    FusedProgramError,
    parse_program,
    render_c_body,
    render_c_expression,
)
from mxkit.ndarray.registry import get_registry


def program(steps, num_inputs=2, dtype="float32"):
    return json.dumps({"dtype": dtype, "num_inputs": num_inputs, "steps": steps})


A_TIMES_B_PLUS_1 = program([["mul", "x0", "x1"], ["add", "v0", 1]])

# hand-written numpy of each primitive (the reference the kernels must match)
REFERENCE = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "power": lambda a, b: np.abs(a) ** b, "maximum": np.maximum, "minimum": np.minimum, "hypot": np.hypot,
    "logaddexp": np.logaddexp, "equal": lambda a, b: (a == b) * 1.0, "not_equal": lambda a, b: (a != b) * 1.0,
    "greater": lambda a, b: (a > b) * 1.0, "greater_equal": lambda a, b: (a >= b) * 1.0,
    "lesser": lambda a, b: (a < b) * 1.0, "lesser_equal": lambda a, b: (a <= b) * 1.0,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)) * 1.0, "logical_or": lambda a, b: ((a != 0) | (b != 0)) * 1.0,
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)) * 1.0, "negative": lambda a: -a, "abs": np.abs,
    "sign": np.sign, "copy": lambda a: a, "where": lambda c, a, b: np.where(c != 0, a, b),
    "clip": lambda a: np.clip(a, -0.5, 0.75), "exp": np.exp, "expm1": np.expm1, "log": lambda a: np.log(np.abs(a)),
    "log10": lambda a: np.log10(np.abs(a)), "log2": lambda a: np.log2(np.abs(a)),
    "log1p": lambda a: np.log1p(np.abs(a)), "sqrt": lambda a: np.sqrt(np.abs(a)), "cbrt": np.cbrt, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "arcsin": lambda a: np.arcsin(a / 3), "arccos": lambda a: np.arccos(a / 3),
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
    "arccosh": lambda a: np.arccosh(np.abs(a) + 1), "arctanh": lambda a: np.arctanh(a / 3), "floor": np.floor,
    "ceil": np.ceil, "rint": np.rint, "trunc": np.trunc,
}
# primitives applied to a transformed input, so that every one sees its domain
PREPARE = {"power": ("abs", 0), "log": ("abs", 0), "log10": ("abs", 0), "log2": ("abs", 0),
           "log1p": ("abs", 0), "sqrt": ("abs", 0), "arccosh": ("abs+1", 0),
           "arcsin": ("/3", 0), "arccos": ("/3", 0), "arctanh": ("/3", 0)}


def primitive_program(name):
    arity = PRIMITIVES[name].arity
    steps, operand = [], "x0"
    kind = PREPARE.get(name, (None,))[0]
    if kind == "abs":
        steps.append(["abs", "x0"])
    elif kind == "abs+1":
        steps += [["abs", "x0"], ["add", "v0", 1]]
    elif kind == "/3":
        steps.append(["div", "x0", 3])
    if steps:
        operand = f"v{len(steps) - 1}"
    if name == "clip":
        steps.append(["clip", operand, -0.5, 0.75])
    else:
        steps.append([name, operand, *["x1", "x2"][:arity - 1]])
    return program(steps, num_inputs=3)


def test_every_primitive_has_a_reference():
    assert set(REFERENCE) == set(PRIMITIVES)


@pytest.mark.parametrize("use_numexpr", [True, False], ids=["numexpr", "ufuncs"])
@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_each_primitive_matches_numpy_through_both_kernels(name, use_numexpr):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-2, 2, (4, 5)).astype("float32")
    x0[0, :3] = [0.0, 1.0, -1.0]
    x1 = rng.uniform(-2, 2, (1, 5)).astype("float32")   # broadcast along the first axis
    x1[0, 1] = 1.0                                         # x0 == x1 somewhere
    x2 = rng.uniform(-2, 2, (4, 1)).astype("float32")
    out = np.full((4, 5), np.nan, dtype="float32")
    with fused_elemwise.use_numexpr(use_numexpr), np.errstate(all="ignore"):  # log(0) is -inf in both
        fused_elemwise.run_program(np, primitive_program(name), [x0, x1, x2], out)
        args = [x0, x1, x2][:PRIMITIVES[name].arity] if name != "clip" else [x0]
        expected = np.broadcast_to(REFERENCE[name](*args), out.shape)
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-6)


def test_render_c_expression_of_a_times_b_plus_1():
    assert render_c_expression(A_TIMES_B_PLUS_1, ["a", "b"]) == "((a * b) + 1.0f)"
    doubled = program([["mul", "x0", "x1"], ["add", "v0", 1]], dtype="float64")
    assert render_c_expression(doubled, ["a", "b"]) == "((a * b) + 1.0)"
    sigmoid = program([["negative", "x0"], ["exp", "v0"], ["add", 1, "v1"], ["div", 1, "v2"]], num_inputs=1)
    assert render_c_expression(sigmoid, ["x"]) == "(1.0f / (1.0f + exp((-x))))"
    relu_grad = program([["greater", "x1", 0], ["mul", "x0", "v0"]])
    assert render_c_expression(relu_grad, ["g", "y"]) == "(g * ((y > 0.0f) ? 1.0f : 0.0f))"


def test_render_c_body_computes_each_step_once():
    square_of_sum = program([["add", "x0", "x1"], ["mul", "v0", "v0"]])
    assert render_c_body(square_of_sum, ["a", "b"], out="y") == (
        "float _v0 = (a + b);\nfloat _v1 = (_v0 * _v0);\ny = _v1;")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_rendered_c_computes_what_numpy_computes(tmp_path):
    """Compile every primitive's C rendering and compare its values with the numpy reference."""
    rng = np.random.default_rng(1)
    values = rng.uniform(-2, 2, (3, 16))
    values[:, :2] = [[0.5, 1.0], [0.5, -1.0], [1.0, 0.0]]
    names = sorted(PRIMITIVES)
    lines = ["#include <math.h>", "#include <stdio.h>",
             "int main(void) {", f"  static const double data[3][{values.shape[1]}] = {{"]
    lines += ["    {" + ", ".join(repr(float(v)) for v in row) + "}," for row in values]
    lines += ["  };", f"  for (int i = 0; i < {values.shape[1]}; ++i) {{",
              "    double x0 = data[0][i], x1 = data[1][i], x2 = data[2][i];"]
    for index, name in enumerate(names):
        text = primitive_program(name).replace('"float32"', '"float64"')
        body = render_c_body(text, ["x0", "x1", "x2"], out=f"double r{index}", ctype="double")
        lines += ["    {", *("      " + b for b in body.splitlines()), f'      printf("%.17g\\n", r{index});', "    }"]
    lines += ["  }", "  return 0;", "}"]
    source = tmp_path / "program.c"
    source.write_text("\n".join(lines))
    binary = tmp_path / "program"
    subprocess.run(["cc", "-O0", "-o", str(binary), str(source), "-lm"], check=True)
    printed = np.array([float(v) for v in subprocess.run([str(binary)], check=True, capture_output=True,
                                                         text=True).stdout.split()])
    got = printed.reshape(values.shape[1], len(names))
    for index, name in enumerate(names):
        args = list(values[:PRIMITIVES[name].arity]) if name != "clip" else [values[0]]
        np.testing.assert_allclose(got[:, index], REFERENCE[name](*args), rtol=1e-12, atol=1e-12, err_msg=name)


def test_a_chain_needs_no_scratch_and_a_bushy_tree_one():
    chain = program([["mul", "x0", "x1"], ["add", "v0", 1], ["tanh", "v1"], ["mul", "v2", "x0"]])
    assert fused_elemwise._xp_plan(chain).registers == 1
    bushy = program([["mul", "x0", "x1"], ["mul", "x1", "x0"], ["exp", "v1"], ["add", "v0", "v2"]])
    assert fused_elemwise._xp_plan(bushy).registers == 2


def test_where_may_overwrite_a_dying_value_without_reading_it_back():
    # where(x0 > 0, exp(x0), x1 * 2): the ufunc path keeps x's value and fills in y
    text = program([["greater", "x0", 0], ["exp", "x0"], ["mul", "x1", 2], ["where", "v0", "v1", "v2"]])
    x0 = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    x1 = np.arange(12, dtype="float32").reshape(3, 4)
    out = np.empty((3, 4), dtype="float32")
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, text, [x0, x1], out)
    np.testing.assert_array_equal(out, np.where(x0 > 0, np.exp(x0), x1 * 2))


def test_the_operator_infers_broadcast_shape_and_rejects_mixed_dtypes():
    op = get_registry().get("_FusedElemwise")
    params = op.parse_params({"expression": A_TIMES_B_PLUS_1})
    assert op.count_inputs(params) == 2
    assert op.infer_shape(params, [(3, 1), (1, 4)]) == [(3, 4)]
    assert op.infer_dtype(params, ["float32", "float32"]) == ["float32"]
    with pytest.raises(FusedProgramError, match=r"input 1 has dtype float64.*computes in float32"):
        op.infer_dtype(params, ["float32", "float64"])


def test_the_operator_runs_imperatively():
    from mxkit import ndarray as nd

    a, b = nd.array([[1.0, 2.0]]), nd.array([[3.0], [4.0]])
    result = nd._FusedElemwise(a, b, expression=A_TIMES_B_PLUS_1)
    np.testing.assert_array_equal(result.asnumpy(), [[4.0, 7.0], [5.0, 9.0]])


@pytest.mark.parametrize("text, message", [
    ("not json", r"not valid JSON"),
    (program([["mul", "x0", "x1"]], dtype="int32"), r"dtype 'int32' is not supported; expected one of float32"),
    (program([["frobnicate", "x0"]]), r"step 0 .*primitive among .*add"),
    (program([["add", "x0"]]), r"add takes 2 operands, got 1"),
    (program([["add", "x0", "x2"]]), r"operand 'x2' is out of range \(the program has 2 inputs\)"),
    (program([["add", "x0", "v0"]]), r"operand 'v0' is out of range"),
    (program([["add", "x0", "y1"]]), r"operand 'y1' must be 'x<i>'"),
    (program([["add", "x0", True]]), r"operand True must be"),
    (program([]), r"has no steps"),
    (json.dumps({"steps": []}), r"must be an object with dtype, num_inputs and steps"),
])
def test_malformed_programs_fail_naming_the_problem(text, message):
    with pytest.raises(FusedProgramError, match=message):
        parse_program(text)


def test_render_checks_the_number_of_names():
    with pytest.raises(FusedProgramError, match=r"2 inputs, got 1 names"):
        render_c_expression(A_TIMES_B_PLUS_1, ["a"])


def test_numexpr_is_used_when_available_and_not_when_turned_off(monkeypatch):
    numexpr = pytest.importorskip("numexpr")
    calls = []
    original = numexpr.evaluate
    monkeypatch.setattr(numexpr, "evaluate", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    a = np.ones((2, 3), dtype="float32")
    out = np.empty((2, 3), dtype="float32")
    with fused_elemwise.use_numexpr("always"):
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [a, a], out)
    assert calls == ["((x0 * x1) + c0)"] and out.dtype == np.float32
    with fused_elemwise.use_numexpr(False):
        assert not fused_elemwise.numexpr_available()
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [a, a], out)
    assert len(calls) == 1
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))


def test_program_without_numexpr_form_takes_the_ufunc_path(monkeypatch):
    numexpr = pytest.importorskip("numexpr")
    monkeypatch.setattr(numexpr, "evaluate", lambda *a, **k: pytest.fail("numexpr has no cbrt"))
    x = np.array([8.0, -27.0], dtype="float32")
    out = np.empty(2, dtype="float32")
    fused_elemwise.run_program(np, program([["cbrt", "x0"]], num_inputs=1), [x], out)
    np.testing.assert_allclose(out, [2.0, -3.0])


def test_scratch_buffers_are_reused_across_calls():
    bushy = program([["mul", "x0", "x1"], ["mul", "x1", "x0"], ["exp", "v1"], ["add", "v0", "v2"]])
    a = np.ones((8, 8), dtype="float32")
    out = np.empty((8, 8), dtype="float32")
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, bushy, [a, a], out)
        first = fused_elemwise._scratch_array(np, 1, (8, 8), np.dtype("float32"))
        fused_elemwise.run_program(np, bushy, [a, a], out)
    assert np.shares_memory(first, fused_elemwise._scratch_array(np, 1, (8, 8), np.dtype("float32")))


@pytest.mark.parametrize("alias", [0, 1])
def test_an_input_stored_in_the_output_is_computed_block_by_block_without_a_copy_of_the_output(monkeypatch, alias):
    """The planner may give a fused node an input's memory: the program reads that input after writing its
    output register, so it runs aside, a block at a time (a buffer of BLOCK_ELEMENTS, not of the output)."""
    reads_late = program([["mul", "x0", "x1"], ["add", "v0", "x0"], ["maximum", "v1", "x1"]])
    monkeypatch.setattr(fused_elemwise, "BLOCK_ELEMENTS", 16)
    rng = np.random.default_rng(alias)
    x0, x1 = rng.standard_normal((2, 5, 21)).astype("float32")
    expected = np.maximum(x0 * x1 + x0, x1)
    inputs = [x0, x1]
    out = inputs[alias]
    monkeypatch.setattr(np, "empty_like", lambda *a, **k: pytest.fail("a copy of the whole output"))
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, reads_late, inputs, out)
    np.testing.assert_array_equal(out, expected)


def test_an_input_overlapping_the_output_elsewhere_is_still_computed_aside_whole(monkeypatch):
    reads_late = program([["mul", "x0", "x1"], ["add", "v0", "x0"]])
    monkeypatch.setattr(fused_elemwise, "BLOCK_ELEMENTS", 4)
    base = np.arange(40, dtype="float32")
    x0, out = base[:32], base[8:]  # overlapping, shifted: blocks would read what earlier blocks wrote
    x1 = np.full(32, 2.0, dtype="float32")
    expected = x0 * x1 + x0
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, reads_late, [x0, x1], out)
    np.testing.assert_array_equal(out, expected)


# ---- property: the register allocation of the ufunc path -------------------------------------

FUZZ_PRIMITIVES = ["where", "add", "where", "sub", "mul", "where", "maximum", "greater", "clip", "negative", "tanh",
                   "copy", "abs"]


@st.composite
def random_programs(draw):
    """Straight-line programs whose values are read any number of times (or never)."""
    steps = []
    for position in range(draw(st.integers(3, 9))):
        name = draw(st.sampled_from(FUZZ_PRIMITIVES))
        earlier = (st.integers(max(position - 3, 0), position - 1).map(lambda k: f"v{k}") if position
                   else st.sampled_from(["x0"]))   # mostly recent values: they die here, and share registers
        operand = st.one_of(earlier, earlier, earlier, st.sampled_from(["x0", "x1", "x2"]),
                            st.sampled_from([0.5, -1.0]))
        if name == "clip":
            steps.append(["clip", draw(operand.filter(lambda o: isinstance(o, str))), -0.5, 0.75])
        else:
            steps.append([name, *(draw(operand) for _ in range(PRIMITIVES[name].arity))])
    return program(steps, num_inputs=3)


def evaluate_naively(text, inputs, shape):
    """Every step into a fresh array: the reference for the register-sharing kernel."""
    values = []
    parsed = parse_program(text)
    for step in parsed.steps:
        args = [np.float32(o) if isinstance(o, float) else inputs[int(o[1:])] if o[0] == "x" else values[int(o[1:])]
                for o in step[1:]]
        if step[0] == "clip":
            args = args[:1]
        values.append(np.broadcast_to(REFERENCE[step[0]](*args), shape).astype("float32"))
    return values[-1]


@settings(max_examples=200, deadline=None)
@given(random_programs(), st.integers(0, 2**31 - 1))
def test_register_sharing_never_overwrites_a_live_value(text, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-2, 2, s).astype("float32") for s in ((3, 4), (1, 4), (3, 1))]
    out = np.full((3, 4), np.nan, dtype="float32")
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, text, inputs, out)
    np.testing.assert_allclose(out, evaluate_naively(text, inputs, (3, 4)), rtol=1e-6, atol=1e-6)


def test_where_whose_branches_both_die_keeps_x_until_it_is_read():
    text = program([["tanh", "x0"], ["abs", "x1"], ["where", "x2", "v0", "v1"], ["add", "v2", 0.5]], num_inputs=3)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-2, 2, s).astype("float32") for s in ((3, 4), (1, 4), (3, 1))]
    out = np.empty((3, 4), dtype="float32")
    with fused_elemwise.use_numexpr(False):
        fused_elemwise.run_program(np, text, inputs, out)
    np.testing.assert_allclose(out, evaluate_naively(text, inputs, (3, 4)), rtol=1e-6)


def test_auto_mode_keeps_numexpr_for_large_arithmetic_programs(monkeypatch):
    numexpr = pytest.importorskip("numexpr")
    calls = []
    original = numexpr.evaluate
    monkeypatch.setattr(numexpr, "evaluate", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    monkeypatch.setattr(fused_elemwise, "_core_count", lambda: fused_elemwise.NUMEXPR_MIN_CORES)
    large = np.ones(fused_elemwise.NUMEXPR_MIN_ELEMENTS, dtype="float32")
    small = np.ones(16, dtype="float32")
    tanh_of_sum = program([["add", "x0", "x1"], ["tanh", "v0"]])
    with fused_elemwise.use_numexpr("auto"):
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [small, small], np.empty_like(small))
        assert calls == []                                   # too small: numexpr's call costs more
        fused_elemwise.run_program(np, tanh_of_sum, [large, large], np.empty_like(large))
        assert calls == []                                   # numpy's SIMD tanh is faster
        row = np.ones((1, 1 << 10), dtype="float32")
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [large.reshape(-1, 1 << 10), row],
                                   np.empty((64, 1 << 10), dtype="float32"))
        assert calls == []                                   # broadcasting: numexpr is slow at it
        out = np.empty_like(large)
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [large, large], out)
        assert len(calls) == 1
        monkeypatch.setattr(fused_elemwise, "_core_count", lambda: 2)
        fused_elemwise.run_program(np, A_TIMES_B_PLUS_1, [large, large], out)
        assert len(calls) == 1                               # two cores: the ufuncs were faster
    np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(FusedProgramError, match=r"mode 'sometimes' is not one of auto, always, never"):
        with fused_elemwise.use_numexpr("sometimes"):
            pass
