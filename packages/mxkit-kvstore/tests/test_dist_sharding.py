"""Sharding: consistent hashing of small keys, equal contiguous parts of big arrays."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist.sharding import HashRing, ShardPlan


@given(size=st.integers(1, 10_000), servers=st.integers(1, 7), bound=st.integers(1, 5_000))
def test_parts_cover_the_value_once_in_order(size, servers, bound):
    parts = ShardPlan(servers, bound).parts("w", size)
    assert parts[0].start == 0 and parts[-1].stop == size
    for before, after in itertools.pairwise(parts):
        assert before.stop == after.start
    if size >= bound and servers > 1 and size >= servers:
        # one part per server, sizes differing by at most one element
        assert [p.server for p in parts] == list(range(servers))
        assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
        assert not any(p.whole for p in parts)
    else:
        assert len(parts) == 1 and parts[0].whole


def test_a_big_array_is_split_as_mxnet_splits_it():
    # MXNet's EncodeDefaultKey: num_arr / num_servers each, the remainder on the first ones
    parts = ShardPlan(3, 10).parts(0, 11)
    assert [(p.start, p.stop) for p in parts] == [(0, 4), (4, 8), (8, 11)]


def test_adding_a_server_moves_keys_only_to_it():
    keys = [f"layer{i}_weight" for i in range(500)] + list(range(500))
    before, after = HashRing(3), HashRing(4)
    moved = [key for key in keys if before.owner(key) != after.owner(key)]
    assert moved, "a fourth server takes some keys"
    assert all(after.owner(key) == 3 for key in moved)
    # about a quarter of the keys move, not most of them (as with hash % num_servers)
    assert len(moved) < 0.45 * len(keys)


def test_keys_spread_over_servers_and_int_and_str_keys_differ():
    ring = HashRing(4)
    counts = [0] * 4
    for key in range(2000):
        counts[ring.owner(key)] += 1
    assert min(counts) > 2000 / 4 * 0.5
    assert {ring.owner(str(k)) for k in range(50)} != set() and \
        [ring.owner(k) for k in range(50)] != [ring.owner(str(k)) for k in range(50)]


@pytest.mark.parametrize("servers", [0, -1, 1.5, True])
def test_bad_server_counts_are_rejected(servers):
    with pytest.raises(KVStoreError, match="num_servers >= 1"):
        HashRing(servers)


def test_a_bad_bound_is_rejected():
    with pytest.raises(KVStoreError, match="kvstore_bigarray_bound must be an int >= 1, got 0"):
        ShardPlan(2, 0)
