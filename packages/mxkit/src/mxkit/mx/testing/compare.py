"""Comparing arrays the way MXNet 1.9.1's ``test_utils`` does.

Tolerances default by dtype (``default_rtols``/``default_atols``); a failed
``assert_almost_equal`` names the worst element, its index and both values, counts the
mismatching elements, and prints the largest few before raising ``AssertionError``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError


def default_dtype() -> type:
    """The dtype of test arrays made without one (float32, as in MXNet)."""
    return np.float32


def _tf32_enabled(ctx: Any) -> bool:
    """Whether float32 products on ``ctx`` may run on TF32 tensor cores (config ``cuda_tf32``, which
    the CUDA plugin declares; without it, or off a GPU, they do not)."""
    if ctx is None or getattr(ctx, "device_type", None) != "gpu":
        return False
    from mxkit.core import config

    try:
        return bool(config.get("cuda_tf32"))
    except MXKitError:  # no CUDA plugin installed: the key is unknown
        return False


def effective_dtype(dat: Any) -> np.dtype[Any]:
    """The dtype whose tolerances suit results computed from ``dat`` (MXNet 1.9.1's helper).

    A float32 product or convolution on TF32 tensor cores keeps about float16's mantissa, so for
    float32 data on a GPU where TF32 is allowed this is float16; otherwise ``dat``'s own dtype.
    (MXNet also asks for an Ampere GPU; where TF32 is allowed on an older one the tolerance is
    only looser than needed.)
    """
    dtype: np.dtype[Any] = np.dtype(dat.dtype)
    if dtype == np.dtype(np.float32) and _tf32_enabled(getattr(dat, "context", getattr(dat, "ctx", None))):
        return np.dtype(np.float16)
    return dtype


def default_rtols() -> dict[np.dtype[Any], float]:
    """Relative tolerance per dtype used when a comparison gives none."""
    floats: dict[np.dtype[Any], float] = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
                                          np.dtype(np.float64): 1e-5}
    return floats | dict.fromkeys(_EXACT_DTYPES, 0.0)


def default_atols() -> dict[np.dtype[Any], float]:
    """Absolute tolerance per dtype used when a comparison gives none."""
    floats: dict[np.dtype[Any], float] = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
                                          np.dtype(np.float64): 1e-20}
    return floats | dict.fromkeys(_EXACT_DTYPES, 0.0)


def default_numeric_eps() -> dict[np.dtype, float]:
    """Finite-difference step per dtype (powers of two: adding one to an input drops no bits)."""
    return {np.dtype(np.float16): 1.0 / 2**6, np.dtype(np.float32): 1.0 / 2**9, np.dtype(np.float64): 1.0 / 2**14}


_EXACT_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                              np.uint32, np.int64, np.uint64))


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    """``rtol``, or the default relative tolerance of ``dtype``."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    """``atol``, or the default absolute tolerance of ``dtype``."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_etol(etol: float | None = None) -> float:
    """The tolerated fraction of mismatching elements (0 unless given)."""
    return 0 if etol is None else etol


def get_tolerance(data: Any, tol: Any, default_tol: dict[Any, float]) -> float:
    """The tolerance for comparing ``data``: a number as given, else by its dtype.

    ``tol`` may be a dict of dtype to tolerance; dtypes it lacks use ``default_tol``.
    """
    if isinstance(tol, numbers.Number):
        return float(tol)  # type: ignore[arg-type]
    dtype = np.dtype(getattr(data, "dtype", np.float64))
    table = {np.dtype(k): float(v) for k, v in (tol or {}).items()}
    if dtype in table:
        return table[dtype]
    if dtype not in default_tol:
        # bfloat16 and other dtypes without a table entry: compare them as float16 is compared
        dtype = np.dtype(np.float16) if dtype.kind == "f" or dtype.kind == "V" else np.dtype(np.float64)
    return float(default_tol[dtype])


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing ``x`` with ``y``: the looser default of the two dtypes."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def as_numpy(value: Any) -> np.ndarray:
    """A numpy array of an NDArray (synchronising), a numpy array or anything array-like."""
    if hasattr(value, "asnumpy"):
        host: np.ndarray = value.asnumpy()
        return host
    return np.asarray(value)


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` have the same shape and exactly the same elements."""
    return bool(np.array_equal(as_numpy(a), as_numpy(b)))


def _check_shapes(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise AssertionError(f"a.shape = {a.shape} and b.shape = {b.shape} are not equal "
                             f"(use_broadcast=False compares equal shapes only)")


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, use_broadcast: bool = True) -> bool:
    """Whether ``|a - b| <= atol + rtol * |b|`` everywhere (``numpy.allclose``).

    Without tolerances the float64 defaults apply (rtol 1e-5, atol 1e-20), as in MXNet.
    """
    a, b = as_numpy(a), as_numpy(b)
    if not use_broadcast:
        _check_shapes(a, b)
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan))


def find_max_violation(a: np.ndarray, b: np.ndarray, rtol: float | None = None,
                       atol: float | None = None) -> tuple[tuple[int, ...], float]:
    """The index of the element that exceeds the tolerance most, and by how many tolerances.

    Equal elements (infinities of one sign included) do not violate; NaN is the worst.
    """
    rtol, atol = get_rtol(rtol), get_atol(atol)
    violation = _violation(a, b, rtol, atol)
    if violation.size == 0:
        return (), 0.0
    flat = int(np.argmax(violation))
    index = tuple(int(i) for i in np.unravel_index(flat, violation.shape))
    return index, float(violation.reshape(-1)[flat])


def _violation(a: Any, b: Any, rtol: float, atol: float) -> np.ndarray:
    """``|a - b| / (atol + rtol * |b|)`` per element, 0 where equal, inf where NaN.

    Computed with numpy's promotion of the arrays' own dtypes, as MXNet computes it: the
    difference in the common dtype, the tolerance in ``b``'s (so float32 reports match).
    """
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if np.result_type(a, b).kind != "f":
        a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        difference = np.where(np.equal(a, b), 0, np.abs(a - b))
        violation = difference / (atol + rtol * np.abs(b) + 1e-20)
    return np.where(np.isnan(violation), np.inf, violation)


def location_error(a: np.ndarray, b: np.ndarray, index: tuple[int, ...], names: tuple[str, str],
                   max_error: bool = False) -> str:
    """``Location of [maximum ]error: (i, j), a=..., b=...`` for error messages."""
    maximum = "maximum " if max_error else ""
    return (f"Location of {maximum}error: {index}, {names[0]}={float(a[index]):.8f}, "
            f"{names[1]}={float(b[index]):.8f}")


#: MXNet's spelling
locationError = location_error


def _mismatch_mask(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    different: np.ndarray = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return different


def assert_almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None, names: tuple[str, str] = ("a", "b"),
                        equal_nan: bool = False, use_broadcast: bool = True,
                        mismatches: tuple[int, int] = (10, 10)) -> None:
    """Raise ``AssertionError`` unless ``a`` and ``b`` are equal within the tolerances.

    Parameters
    ----------
    a, b : NDArray, numpy.ndarray or array-like
        The values to compare (``b`` is the reference: ``rtol`` scales ``|b|``).
    rtol, atol : float or dict of dtype to float, optional
        Tolerances; by default the looser of the two dtypes' (float32: 1e-4 and 1e-3).
    names : tuple of str
        What to call ``a`` and ``b`` in the message.
    equal_nan : bool
        Whether NaN equals NaN.
    use_broadcast : bool
        Whether shapes may differ where numpy broadcasting reconciles them.
    mismatches : tuple of int
        How many of the worst elements to print, and how many to look for.

    Raises
    ------
    AssertionError
        ``Error <e> exceeds tolerance rtol=..., atol=... (mismatch <p>%).`` followed by the
        location, index and both values of the worst element and the two arrays.
    """
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = as_numpy(a), as_numpy(b)
    if not use_broadcast:
        _check_shapes(a, b)
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        np.testing.assert_equal(a, b)
        return
    try:
        a_full, b_full = np.broadcast_arrays(a, b)
    except ValueError:
        raise AssertionError(f"shapes {a.shape} ({names[0]}) and {b.shape} ({names[1]}) do not broadcast "
                             f"together; compare arrays of one shape") from None
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    index, worst = find_max_violation(a_full, b_full, rtol, atol)
    if index == () and a_full.ndim > 0:
        message = f"Error {worst:f} exceeds tolerance rtol={rtol:e}, atol={atol:e}.\n"
    else:
        mask = _mismatch_mask(a_full.astype(np.float64), b_full.astype(np.float64), rtol, atol, equal_nan)
        count = int(mask.sum())
        _print_worst(a_full, b_full, mask, rtol, atol, names, mismatches)
        message = (f"Error {worst:f} exceeds tolerance rtol={rtol:e}, atol={atol:e} "
                   f"(mismatch {100.0 * count / max(a_full.size, 1):f}%).\n"
                   + location_error(a_full, b_full, index, names, max_error=True))
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(np.testing.build_err_msg([a, b], err_msg=message, names=names))


def _print_worst(a: np.ndarray, b: np.ndarray, mask: np.ndarray, rtol: float, atol: float,
                 names: tuple[str, str], mismatches: tuple[int, int]) -> None:
    shown = mismatches[0]
    if shown <= 0:
        return
    violation = _violation(a, b, rtol, atol)
    order = np.argsort(-violation.reshape(-1)[mask.reshape(-1)], kind="stable")[:shown]
    flat_positions = np.flatnonzero(mask.reshape(-1))[order]
    print(f"\n*** Maximum errors for vector of size {a.size}:  rtol={rtol}, atol={atol}\n")
    for rank, flat in enumerate(flat_positions, start=1):
        index = tuple(int(i) for i in np.unravel_index(int(flat), a.shape))
        print(f"{rank:3d}: Error {violation[index]:f}  {location_error(a, b, index, names)}")


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0, equal_nan: bool = True) -> None:
    """``assert_almost_equal`` with numpy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_ignore_nan(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                                   names: tuple[str, str] = ("a", "b")) -> None:
    """``assert_almost_equal`` where a NaN in either array matches anything."""
    a, b = np.copy(as_numpy(a)), np.copy(as_numpy(b))
    nan = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan] = 0
    b[nan] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f: Callable[..., Any], exception_type: type[BaseException] | tuple[type[BaseException], ...],
                     *args: Any, **kwargs: Any) -> BaseException:
    """Call ``f(*args, **kwargs)`` and return the ``exception_type`` it raises.

    Raises
    ------
    AssertionError
        When ``f`` returns normally; an exception of another type propagates.
    """
    try:
        f(*args, **kwargs)
    except exception_type as exc:
        return exc
    expected = getattr(exception_type, "__name__", str(exception_type))
    raise AssertionError(f"{getattr(f, '__name__', f)!s} returned normally; expected it to raise {expected}")


def np_reduce(dat: np.ndarray, axis: int | Iterable[int] | None, keepdims: bool,
              numpy_reduce_func: Callable[..., np.ndarray]) -> np.ndarray:
    """Reduce ``dat`` over ``axis`` one axis at a time with ``numpy_reduce_func`` (a reference
    for reduction operators whose numpy counterpart takes a single axis).

    Parameters
    ----------
    dat : numpy.ndarray
    axis : int, iterable of int or None
        The axes to reduce (None: every axis); negative axes count from the end.
    keepdims : bool
        Keep reduced axes with size 1.
    numpy_reduce_func : callable
        ``f(array, axis=i)``, e.g. ``np.sum``.
    """
    ndim = np.ndim(dat)
    axes: list[int] = (list(range(ndim)) if axis is None
                       else [int(axis)] if isinstance(axis, numbers.Integral)
                       else [int(a) for a in axis])  # type: ignore[union-attr]
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise MXKitError(f"np_reduce: axis {a} is out of range for an array of {ndim} dimensions; "
                             f"expected -{ndim}..{ndim - 1}")
    axes = sorted({a % ndim for a in axes}) if ndim else []
    result = dat
    for a in reversed(axes):
        result = numpy_reduce_func(result, axis=a)
    if keepdims:
        shape = list(np.shape(dat))
        for a in axes:
            shape[a] = 1
        result = np.reshape(result, tuple(shape))
    return result
