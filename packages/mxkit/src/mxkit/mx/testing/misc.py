"""Small helpers of MXNet's ``test_utils``: retries, sampling, comparing optimizers and symbols."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mxkit.mx.testing.arrays import default_context
from mxkit.mx.testing.compare import assert_almost_equal, same


def random_sample(population: Sequence[Any], k: int) -> list[Any]:
    """``k`` elements of ``population`` in random order, without repetition (numpy's RNG)."""
    if not 0 <= k <= len(population):
        raise ValueError(f"k must be in [0, {len(population)}], got {k}")
    chosen = list(population)
    np.random.shuffle(chosen)
    return chosen[:k]


def retry(n: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: rerun a stochastic test up to ``n`` times while it raises ``AssertionError``."""
    if n <= 0:
        raise ValueError(f"retry needs n > 0, got {n}")

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(test)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(n):
                try:
                    return test(*args, **kwargs)
                except AssertionError:
                    if attempt == n - 1:
                        raise
            return None
        return wrapper
    return decorate


def same_array(array1: Any, array2: Any) -> bool:
    """Whether two NDArrays share memory (a write through one is seen through the other)."""
    array1[:] += 1
    shared = same(array1.asnumpy(), array2.asnumpy())
    array1[:] -= 1
    return bool(shared and same(array1.asnumpy(), array2.asnumpy()))


def create_2d_tensor(rows: int, columns: int, dtype: Any = np.int64) -> Any:
    """An NDArray whose row ``i`` is filled with ``i``."""
    from mxkit import ndarray as nd

    return nd.array(np.repeat(np.arange(rows, dtype=dtype)[:, None], columns, axis=1), dtype=dtype)


def create_vector(size: int, dtype: Any = np.int64) -> Any:
    """The NDArray ``0, 1, ..., size - 1``."""
    from mxkit import ndarray as nd

    return nd.array(np.arange(size, dtype=dtype), dtype=dtype)


def checkShapes(a: Any, b: Any) -> None:
    """Assert that two arrays have one shape."""
    assert a.shape == b.shape, f"shapes differ: {a.shape} vs {b.shape}"


def collapse_sum_like(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Sum ``a`` over the axes that broadcasting ``shape`` to ``a.shape`` added or stretched."""
    shape = tuple(shape)
    if len(a.shape) < len(shape):
        raise ValueError(f"shape {shape} has more axes than the array {a.shape}")
    if int(np.prod(shape)) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = len(a.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s != a.shape[lead + i])
    summed: np.ndarray = a.sum(axis=axes).reshape(shape)
    return summed


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Assert that two (nested tuples of) arrays are almost equal; ``None`` on either side passes."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1: Any, opt2: Any, shape: Any, dtype: Any, w_stype: str = "default",
                      g_stype: str = "default", rtol: float = 1e-4, atol: float = 1e-5,
                      compare_states: bool = True, ntensors: int = 1) -> None:
    """Apply one update of two optimizers to the same random weight and gradient and compare them.

    ``shape`` a list of shapes compares ``opt2`` updating all tensors at once with ``opt1``
    updating them one by one. As MXNet's, a sparse ``w_stype`` gives ``opt2`` a sparse weight
    with every row stored and ``opt1`` its dense copy; a sparse ``g_stype`` gives ``opt2`` a
    random sparse gradient and ``opt1`` its dense copy.
    """
    from mxkit.mx.testing.arrays import rand_ndarray
    from mxkit.ndarray import random as nd_random

    ctx = default_context()
    if not isinstance(shape, list):
        if w_stype == "default":
            w2 = nd_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
            w1 = w2.copyto(ctx)
        else:
            w2 = rand_ndarray(shape, w_stype, density=1, dtype=dtype)
            w1 = w2.copyto(ctx).tostype("default")
        if g_stype == "default":
            g2 = nd_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
            g1 = g2.copyto(ctx)
        else:
            g2 = rand_ndarray(shape, g_stype, dtype=dtype)
            g1 = g2.copyto(ctx).tostype("default")
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = tuple(nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape)
    g1 = tuple(nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape)
    w2 = tuple(w.copyto(ctx) for w in w1)
    g2 = tuple(g.copyto(ctx) for g in g1)
    states2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, states2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, states2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


def same_symbol_structure(sym1: Any, sym2: Any) -> bool:
    """Whether two symbols have the same operator at every node position."""
    nodes1 = json.loads(sym1.tojson())["nodes"]
    nodes2 = json.loads(sym2.tojson())["nodes"]
    return all(n1["op"] == n2["op"] for n1, n2 in zip(nodes1, nodes2))


class DummyIter:
    """An iterator that returns the first batch of ``real_iter`` forever (for speed tests)."""

    def __init__(self, real_iter: Any):
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(iter(real_iter))

    def __iter__(self) -> DummyIter:
        return self

    def __next__(self) -> Any:
        return self.the_batch

    next = __next__

    def reset(self) -> None:
        """Nothing to rewind: the same batch is returned forever."""

