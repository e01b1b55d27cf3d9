"""Checking a symbol: forward and backward against expected values, gradients against
central finite differences, and one symbol against itself on several devices and dtypes.

These are MXNet 1.9.1's ``check_*`` helpers with its arguments and semantics. Inputs given
as numpy arrays are copied into NDArrays of ``dtype`` on ``ctx``; every comparison goes
through :func:`~mxkit.mx.testing.compare.assert_almost_equal`, whose ``names`` say which
argument or output failed (``NUMERICAL_x`` vs ``BACKWARD_x``, ``EXPECTED_y`` vs ``FORWARD_y``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError
from mxkit.mx.testing.arrays import default_context
from mxkit.mx.testing.compare import (
    as_numpy,
    assert_almost_equal,
    default_numeric_eps,
    get_tolerance,
    get_tols,
)

_FLOAT_DTYPES = (np.float16, np.float32, np.float64)


def _check_dtype(dtype: Any, allow_asnumpy: bool) -> None:
    if (allow_asnumpy and isinstance(dtype, str) and dtype == "asnumpy") or dtype in _FLOAT_DTYPES:
        return
    choices = "np.float16, np.float32, np.float64" + (' or "asnumpy"' if allow_asnumpy else "")
    raise MXKitError(f"dtype={dtype!r} is not supported here; expected {choices}")


def _to_ndarray(value: Any, ctx: Any, dtype: Any) -> Any:
    from mxkit.ndarray import NDArray, array

    if isinstance(value, NDArray):
        return value
    if getattr(value, "stype", "default") in ("row_sparse", "csr"):
        return value.tostype("default")  # graphs compute on dense values
    value = np.asarray(value)
    return array(value, ctx=ctx, dtype=value.dtype if isinstance(dtype, str) and dtype == "asnumpy" else dtype)


def _by_name(values: Any, names: list[str], what: str) -> dict[str, Any]:
    if isinstance(values, Mapping):
        if set(values) != set(names):
            raise MXKitError(f"the {what} given ({', '.join(sorted(values))}) do not match the symbol's "
                             f"({', '.join(sorted(names))}); give a value for each of them")
        return dict(values)
    if not isinstance(values, (list, tuple)):
        raise MXKitError(f"{what} must be a list (in the symbol's order: {', '.join(names)}) or a dict of name "
                         f"to array, got {type(values).__name__}")
    if len(values) != len(names):
        raise MXKitError(f"{len(values)} {what} given for the symbol's {len(names)} ({', '.join(names)})")
    return dict(zip(names, values))


def parse_location(sym: Any, location: Any, ctx: Any, dtype: Any = np.float32) -> dict[str, Any]:
    """Argument name to NDArray from a list (``list_arguments`` order) or a dict."""
    _check_dtype(dtype, allow_asnumpy=True)
    location = _by_name(location, sym.list_arguments(), "arguments")
    return {name: _to_ndarray(value, ctx, dtype) for name, value in location.items()}


def parse_aux_states(sym: Any, aux_states: Any, ctx: Any, dtype: Any = np.float32) -> dict[str, Any] | None:
    """Auxiliary-state name to NDArray (or None when ``aux_states`` is None)."""
    _check_dtype(dtype, allow_asnumpy=True)
    if aux_states is None:
        return None
    aux_states = _by_name(aux_states, sym.list_auxiliary_states(), "auxiliary states")
    return {name: _to_ndarray(value, ctx, dtype) for name, value in aux_states.items()}


def simple_forward(sym: Any, ctx: Any = None, is_train: bool = False, **inputs: Any) -> np.ndarray | list[np.ndarray]:
    """The outputs of ``sym`` as numpy arrays, for inputs given as numpy arrays by name
    (one array for a single output)."""
    ctx = ctx or default_context()
    args = {name: _to_ndarray(value, ctx, "asnumpy") for name, value in inputs.items()}
    executor = sym.bind(ctx, args=args)
    executor.forward(is_train=is_train)
    outputs = [out.asnumpy() for out in executor.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def _grad_requests(sym: Any, grad_nodes: Any) -> dict[str, str]:
    if grad_nodes is None:
        return dict.fromkeys(sym.list_arguments(), "write")
    if isinstance(grad_nodes, Mapping):
        return dict(grad_nodes)
    if isinstance(grad_nodes, (list, tuple)):
        return dict.fromkeys(grad_nodes, "write")
    raise MXKitError(f"grad_nodes must be None, a list of argument names or a dict of name to grad_req, "
                     f"got {grad_nodes!r}")


def numeric_grad(executor: Any, location: dict[str, np.ndarray], aux_states: dict[str, np.ndarray] | None = None,
                 eps: float = 1e-4, use_forward_train: bool = True, dtype: Any = np.float32,
                 projection: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Central finite differences of ``sum(outputs[0] * projection)`` for every float argument.

    Each element moves by ``+eps/2`` and ``-eps/2``; the auxiliary states are reset before
    each forward (BatchNorm's running statistics would drift otherwise).
    """
    _check_dtype(dtype, allow_asnumpy=False)
    grads = {name: np.zeros(np.shape(value), dtype=np.float64) for name, value in location.items()}
    point = {name: np.array(value, dtype=dtype, order="C") for name, value in location.items()}

    def objective() -> float:
        if aux_states is not None:
            for key, value in aux_states.items():
                executor.aux_dict[key][:] = value
        output = executor.forward(is_train=use_forward_train)[0].asnumpy().astype(np.float64)
        return float((output * projection).sum()) if projection is not None else float(output.sum())

    for name, value in point.items():
        executor.arg_dict[name][:] = value
    for name, value in point.items():
        if value.dtype.kind != "f":
            continue
        flat = value.reshape(-1)
        target = executor.arg_dict[name]
        for i in range(flat.size):
            original = flat[i]
            flat[i] = original + eps / 2.0
            target[:] = value
            plus = objective()
            flat[i] = original - eps / 2.0
            target[:] = value
            minus = objective()
            flat[i] = original
            grads[name].reshape(-1)[i] = (plus - minus) / eps
        target[:] = value
    # in the arrays' dtype, as MXNet returns them (so comparisons pick that dtype's tolerances)
    return {name: grad.astype(dtype) for name, grad in grads.items()}


def check_numeric_gradient(sym: Any, location: Any, aux_states: Any = None, numeric_eps: Any = None,
                           rtol: Any = None, atol: Any = None, grad_nodes: Any = None,
                           use_forward_train: bool = True, ctx: Any = None, grad_stype_dict: Any = None,
                           dtype: Any = np.float32) -> None:
    """Compare the symbolic gradient of ``sym`` with central finite differences.

    The scalar differentiated is ``sum(sym_output * P)`` for a random projection ``P`` with
    entries in ``[0.1, 1.1)`` (so no element's gradient is hidden by a zero weight).

    Parameters
    ----------
    sym : Symbol
        One output.
    location : list or dict of numpy.ndarray
        A value for every argument (``list_arguments`` order, or by name).
    aux_states : list or dict of numpy.ndarray, optional
        Values of the auxiliary states (reset before every forward).
    numeric_eps : float or dict of dtype to float, optional
        The finite-difference step (default: float32 2**-9, float64 2**-14).
    rtol, atol : float, optional
        Tolerances of the comparison (default: by dtype).
    grad_nodes : list of str or dict of str to grad_req, optional
        The arguments to check (default: all, ``grad_req='write'``); ``'add'`` checks that
        the gradient was added to the initial gradient array, ``'null'`` that it was untouched.
    use_forward_train : bool
        Whether the finite differences run forward with ``is_train=True``.
    ctx : Context, optional
        The device (default: :func:`default_context`).
    dtype : np.float16, np.float32 or np.float64
        The dtype of the arrays.

    Raises
    ------
    AssertionError
        When a gradient differs, naming ``NUMERICAL_<arg>`` and ``BACKWARD_<arg>`` and the
        worst element.
    """
    _check_dtype(dtype, allow_asnumpy=False)
    # grad_stype_dict names the gradients' storage; the values compared are the same in any
    # storage, so the check compares them densely (as MXNet's does)
    ctx = ctx if ctx is not None else default_context()
    location_nd = parse_location(sym, location, ctx, dtype)
    location_np = {name: value.asnumpy() for name, value in location_nd.items()}
    aux_nd = parse_aux_states(sym, aux_states, ctx, dtype)
    aux_np = {name: value.asnumpy() for name, value in aux_nd.items()} if aux_nd is not None else None
    grad_req = _grad_requests(sym, grad_nodes)
    unknown = sorted(set(grad_req) - set(location_nd))
    if unknown:
        raise MXKitError(f"grad_nodes names {', '.join(unknown)}, which are not arguments of the symbol; its "
                         f"arguments are: {', '.join(sym.list_arguments())}")
    if len(sym.list_outputs()) != 1:
        raise MXKitError(f"check_numeric_gradient needs a symbol with one output, this one has "
                         f"{len(sym.list_outputs())} ({', '.join(sym.list_outputs())}); check them one at a time "
                         f"(sym[i])")

    from mxkit.ndarray import array

    initial_grads = {name: np.random.normal(0, 0.01, size=location_np[name].shape) for name in grad_req}
    args_grad = {name: array(value, ctx=ctx, dtype=dtype) for name, value in initial_grads.items()}
    initial_grads = {name: grad.asnumpy() for name, grad in args_grad.items()}  # as rounded to dtype
    full_req = {name: grad_req.get(name, "null") for name in sym.list_arguments()}
    executor = sym.bind(ctx, args=location_nd, args_grad=args_grad, grad_req=full_req, aux_states=aux_nd)
    outputs = executor.forward(is_train=True)
    projection = np.random.rand(*outputs[0].shape) + 0.1
    eps = get_tolerance(outputs[0], numeric_eps, default_numeric_eps())
    if dtype in (np.float16, np.float32) and eps < 1e-5:
        raise MXKitError(f"numeric_eps={eps} is too small for {np.dtype(dtype).name} finite differences; use at "
                         f"least 1e-5 (or dtype=np.float64)")
    executor.backward(out_grads=[array(projection, ctx=ctx, dtype=outputs[0].dtype)])
    symbolic = {name: executor.grad_dict[name].asnumpy() for name in grad_req if name in executor.grad_dict}
    numeric = numeric_grad(executor, location_np, aux_np, eps=eps, use_forward_train=use_forward_train,
                           dtype=dtype, projection=projection)
    for name, req in grad_req.items():
        names = (f"NUMERICAL_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(numeric[name], symbolic[name], rtol, atol, names)
        elif req == "add":
            assert_almost_equal(numeric[name], symbolic[name] - initial_grads[name], rtol, atol, names)
        elif req == "null":
            # no gradient array is bound for it: nothing can have been written
            continue
        else:
            raise MXKitError(f"grad_req {req!r} for argument {name!r} is not one of 'write', 'add', 'null'")


def check_symbolic_forward(sym: Any, location: Any, expected: Any, rtol: Any = None, atol: Any = None,
                           aux_states: Any = None, ctx: Any = None, equal_nan: bool = False,
                           dtype: Any = np.float32) -> list[Any]:
    """Run ``sym`` forward (``is_train=False``) and compare each output with ``expected``.

    Parameters
    ----------
    expected : list of numpy.ndarray or dict of output name to numpy.ndarray

    Returns
    -------
    list of NDArray
        The executor's outputs.
    """
    ctx = ctx if ctx is not None else default_context()
    location_nd = parse_location(sym, location, ctx, dtype)
    aux_nd = parse_aux_states(sym, aux_states, ctx, dtype)
    output_names = sym.list_outputs()
    if isinstance(expected, Mapping):
        missing = [name for name in output_names if name not in expected]
        if missing:
            raise MXKitError(f"the expected outputs lack {', '.join(missing)}; the symbol's outputs are: "
                             f"{', '.join(output_names)}")
        expected = [expected[name] for name in output_names]
    if len(expected) != len(output_names):
        raise MXKitError(f"{len(expected)} expected outputs given for the symbol's {len(output_names)} "
                         f"({', '.join(output_names)})")
    executor = sym.bind(ctx, args=location_nd, aux_states=aux_nd, grad_req="null")
    outputs = executor.forward(is_train=False)
    for name, expect, output in zip(output_names, expected, outputs):
        assert_almost_equal(expect, output, rtol, atol, (f"EXPECTED_{name}", f"FORWARD_{name}"),
                            equal_nan=equal_nan)
    return list(outputs)


def check_symbolic_backward(sym: Any, location: Any, out_grads: Any, expected: Any, rtol: Any = None,
                            atol: Any = None, aux_states: Any = None, grad_req: Any = "write", ctx: Any = None,
                            grad_stypes: Any = None, equal_nan: bool = False,
                            dtype: Any = np.float32) -> dict[str, Any]:
    """Run ``sym`` forward and backward with ``out_grads`` and compare the argument gradients
    with ``expected``.

    Parameters
    ----------
    out_grads : list or dict of numpy.ndarray, or None
        Head gradients (None: the heads are losses).
    expected : list or dict of numpy.ndarray
        Expected gradient per argument (a list follows ``list_arguments``).
    grad_req : str, list or dict
        ``'write'``, ``'add'`` (the gradient is added to a random initial array, which is
        subtracted before comparing) or ``'null'`` (the array must be left as it was).

    Returns
    -------
    dict of str to NDArray
        The gradient arrays.
    """
    ctx = ctx if ctx is not None else default_context()
    location_nd = parse_location(sym, location, ctx, dtype)
    aux_nd = parse_aux_states(sym, aux_states, ctx, dtype)
    arguments = sym.list_arguments()
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(arguments, expected))
    expected = {name: as_numpy(value) for name, value in expected.items()}
    if isinstance(grad_req, str):
        grad_req = dict.fromkeys(arguments, grad_req)
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(arguments, grad_req))
    initial = {name: np.random.normal(size=value.shape) for name, value in sorted(expected.items())}
    grads = {name: _to_ndarray(value, ctx, expected[name].dtype if dtype == "asnumpy" else dtype)
             for name, value in initial.items()}
    initial = {name: grads[name].asnumpy() for name in initial}  # as rounded to the gradient's dtype
    full_req = {name: (grad_req.get(name, "write") if name in grads else "null") for name in arguments}
    executor = sym.bind(ctx, args=location_nd, args_grad=grads, aux_states=aux_nd, grad_req=full_req)
    executor.forward(is_train=True)
    if isinstance(out_grads, Mapping):
        out_grads = [out_grads[name] for name in sym.list_outputs()]
    if out_grads is not None:
        out_grads = [_to_ndarray(g, ctx, np.asarray(as_numpy(g)).dtype if dtype == "asnumpy" else dtype)
                     for g in out_grads]
    executor.backward(out_grads)
    for name, expect in expected.items():
        names = (f"EXPECTED_{name}", f"BACKWARD_{name}")
        req = full_req[name]
        if req == "write":
            assert_almost_equal(expect, grads[name], rtol, atol, names, equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(expect, grads[name].asnumpy() - initial[name], rtol, atol, names,
                                equal_nan=equal_nan)
        elif req == "null":
            assert_almost_equal(initial[name], grads[name], rtol, atol, names, equal_nan=equal_nan)
        else:
            raise MXKitError(f"grad_req {req!r} for argument {name!r} is not one of 'write', 'add', 'null'")
    for name, stype in (grad_stypes or {}).items():
        if name in grads and stype not in (None, "default"):
            grads[name] = grads[name].tostype(stype)  # returned in the storage asked for, as MXNet's
    return grads


def _smaller_dtype(first: Any, second: Any) -> Any:
    return first if second is None or np.dtype(first).itemsize < np.dtype(second).itemsize else second


def check_consistency(sym: Any, ctx_list: Sequence[Mapping[str, Any]], scale: float = 1.0, grad_req: Any = "write",
                      arg_params: Mapping[str, Any] | None = None, aux_params: Mapping[str, Any] | None = None,
                      rtol: Any = None, atol: Any = None, raise_on_err: bool = True, ground_truth: Any = None,
                      equal_nan: bool = False, use_uniform: bool = False,
                      rand_type: Any = np.float64) -> dict[str, Any]:
    """Run one symbol (or one per entry) on several devices and dtypes and compare.

    Parameters
    ----------
    sym : Symbol or list of Symbol
    ctx_list : list of dict
        ``simple_bind`` arguments per run: ``{"ctx": mx.cpu(0), "data": (2, 3),
        "type_dict": {"data": np.float64}}``.
    scale : float
        Standard deviation (or half-width with ``use_uniform``) of the random arguments.
    grad_req : str
        ``'null'`` compares the forward pass only.
    arg_params, aux_params : dict, optional
        Values to use instead of random ones (auxiliary states default to 0).
    ground_truth : dict, optional
        Reference outputs and gradients (default: the run with the widest output dtype).

    Returns
    -------
    dict of str to NDArray
        The ground truth: outputs and, unless ``grad_req='null'``, gradients by name.
    """
    if len(ctx_list) < 2:
        raise MXKitError(f"check_consistency compares runs: give at least two entries in ctx_list, got "
                         f"{len(ctx_list)}")
    symbols = list(sym) if isinstance(sym, (list, tuple)) else [sym] * len(ctx_list)
    if len(symbols) != len(ctx_list):
        raise MXKitError(f"{len(symbols)} symbols for {len(ctx_list)} contexts; give one symbol or one per context")
    output_names, arg_names = symbols[0].list_outputs(), symbols[0].list_arguments()
    executors = []
    for symbol, spec in zip(symbols, ctx_list):
        if symbol.list_arguments() != arg_names or symbol.list_outputs() != output_names:
            raise MXKitError(f"check_consistency: every symbol must have the arguments {arg_names} and outputs "
                             f"{output_names} of the first; got {symbol.list_arguments()} and "
                             f"{symbol.list_outputs()}")
        spec = dict(spec)
        ctx = spec.pop("ctx", None)
        type_dict = spec.pop("type_dict", None)
        executors.append(symbol.simple_bind(ctx if ctx is not None else default_context(), grad_req=grad_req,
                                            type_dict=type_dict, **spec))
    arg_params = dict(arg_params or {})
    aux_params = dict(aux_params or {})
    for name, arr in sorted(executors[0].arg_dict.items()):
        if name not in arg_params:
            if use_uniform:
                arg_params[name] = np.random.uniform(-0.92 * scale, 0.92 * scale, size=arr.shape).astype(rand_type)
            else:
                arg_params[name] = np.random.normal(size=arr.shape, scale=scale).astype(rand_type)
    for name in executors[0].aux_dict:
        aux_params.setdefault(name, 0)
    for executor in executors:
        for name, arr in executor.arg_dict.items():
            arr[:] = arg_params[name]
        for name, arr in executor.aux_dict.items():
            arr[:] = aux_params[name]
        if grad_req == "add":
            for arr in executor.grad_arrays:
                if arr is not None:
                    arr[:] = 0
    dtypes = [np.dtype(executor.outputs[0].dtype) for executor in executors]
    truth_index = int(np.argmax([d.itemsize for d in dtypes]))
    for executor in executors:
        executor.forward(is_train=False)
    truth = dict(ground_truth) if ground_truth is not None else None
    if truth is None:
        truth = {name: out.copy() for name, out in zip(output_names, executors[truth_index].outputs)}
    _compare_runs(executors, truth_index, truth, output_names, dtypes, rtol, atol, equal_nan, raise_on_err,
                  "forward")
    if grad_req == "null":
        return truth
    for executor in executors:
        executor.forward(is_train=True)
    least_precise = [out.dtype for out in executors[0].outputs]
    for executor in executors:
        least_precise = [_smaller_dtype(out.dtype, dt) for out, dt in zip(executor.outputs, least_precise)]
    golden = [out.asnumpy().astype(dt) for out, dt in zip(executors[0].outputs, least_precise)]
    from mxkit.ndarray import array

    for executor in executors:
        executor.backward([array(g, ctx=out.context, dtype=out.dtype) for g, out in zip(golden, executor.outputs)])
    if ground_truth is None:
        truth = {name: out.copy() for name, out in zip(output_names, executors[truth_index].outputs)}
        truth.update({name: grad.copy() for name, grad in executors[truth_index].grad_dict.items()})
    _compare_runs(executors, truth_index, truth, output_names + arg_names, dtypes, rtol, atol, equal_nan,
                  raise_on_err, "backward")
    return truth


def _compare_runs(executors: list[Any], truth_index: int, truth: dict[str, Any], names: list[str], dtypes: list[Any],
                  rtol: Any,
                  atol: Any, equal_nan: bool, raise_on_err: bool, phase: str) -> None:
    for i, executor in enumerate(executors):
        if i == truth_index:
            continue
        values = dict(zip(executor._symbol.list_outputs(), executor.outputs)) | dict(executor.grad_dict)
        for name in names:
            if name not in truth or truth[name] is None or name not in values:
                continue
            value, reference = values[name], truth[name]
            rt, at = get_tols(np.zeros((), dtype=_smaller_dtype(value.dtype, dtypes[i])),
                              np.zeros((), dtype=_smaller_dtype(reference.dtype, dtypes[truth_index])), rtol, atol)
            try:
                assert_almost_equal(value, reference, rt, at, (f"{name}@run{i}", f"{name}@run{truth_index}"),
                                    equal_nan=equal_nan)
            except AssertionError as exc:
                context = (f"check_consistency ({phase}): run {i} ({np.dtype(value.dtype).name} on "
                           f"{value.context}) differs from run {truth_index} "
                           f"({np.dtype(reference.dtype).name} on {reference.context}) at {name!r}")
                if raise_on_err:
                    raise AssertionError(f"{context}\n{exc}") from None
                print(f"{context}\n{exc}")


__all__ = ["check_consistency", "check_numeric_gradient", "check_symbolic_backward", "check_symbolic_forward",
           "numeric_grad", "parse_aux_states", "parse_location", "simple_forward"]
