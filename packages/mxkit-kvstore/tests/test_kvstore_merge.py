"""The sum and copy kernels against plain numpy, on every path (small, blocked, parallel, strided)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.kvstore import merge


@pytest.mark.parametrize("size", [7, merge.BLOCK_ELEMENTS + 3, 3_000_001])  # one call, blocks, threads
@pytest.mark.parametrize("num_sources", [1, 2, 4])
@pytest.mark.parametrize("accumulate", [False, True])
def test_sum_into_equals_numpy(size, num_sources, accumulate):
    rng = np.random.default_rng(size + num_sources)
    sources = [rng.integers(-50, 50, size).astype(np.float32) for _ in range(num_sources)]
    out = rng.integers(-50, 50, size).astype(np.float32)
    expected = (out if accumulate else np.zeros(size, np.float32)) + np.sum(sources, axis=0)
    merge.sum_into(np, out, sources, accumulate)
    np.testing.assert_array_equal(out, expected)


def test_the_large_case_really_runs_on_several_threads(monkeypatch):
    seen = []
    real = merge._sum_range

    def recording(out, sources, accumulate, start, stop):
        import threading

        seen.append(threading.get_ident())
        real(out, sources, accumulate, start, stop)

    monkeypatch.setattr(merge, "_sum_range", recording)
    monkeypatch.setattr(merge, "merge_threads", lambda: 3)
    size = merge.PARALLEL_MIN_BYTES // 4
    sources = [np.ones(size, np.float32) for _ in range(2)]
    out = np.empty(size, np.float32)
    merge.sum_into(np, out, sources)
    # three ranges; the caller sums the first, pool threads the others
    assert len(seen) == 3 and len(set(seen)) >= 2 and np.all(out == 2.0)


def test_strided_and_mixed_dtype_arrays_take_the_whole_array_path():
    base = np.arange(40, dtype=np.float64).reshape(4, 10)
    out = np.zeros((4, 5), np.float32)
    merge.sum_into(np, out, [base[:, ::2], base[:, 1::2]])
    np.testing.assert_array_equal(out, base[:, ::2] + base[:, 1::2])


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 10**7), parts=st.integers(1, 8))
def test_ranges_cover_everything_once_on_block_boundaries(size, parts):
    ranges = merge._ranges(size, parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == size and len(ranges) <= parts
    for (_, stop), (start, _) in itertools.pairwise(ranges):
        assert stop == start and start % merge.BLOCK_ELEMENTS == 0


def test_copy_to_all():
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = [np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float64)]
    merge.copy_to_all(np, outs, source)
    for out in outs:
        np.testing.assert_array_equal(out, source)
