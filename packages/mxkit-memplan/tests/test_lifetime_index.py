"""The greedy planner's two lifetime indexes against a brute-force overlap test."""

from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.memplan.greedy import LifetimeIndex, MostlyShortLifetimeIndex, ShortLifetimeIndex

STEPS = 70


@st.composite
def intervals(draw, longest: int):
    first = draw(st.integers(0, STEPS - 1))
    return first, min(STEPS - 1, first + draw(st.integers(0, longest)))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from([(LifetimeIndex, STEPS), (ShortLifetimeIndex, 32),
                                   (MostlyShortLifetimeIndex, STEPS)]))
def test_overlapping_is_exactly_the_blocks_sharing_a_step(data, kind):
    index_class, longest = kind
    blocks = data.draw(st.lists(intervals(longest), max_size=40))
    index = index_class(STEPS)
    for block_id, (first, last) in enumerate(blocks):
        index.add(block_id, first, last)
    for _ in range(10):
        first, last = data.draw(intervals(STEPS))
        found = index.overlapping(first, last)
        assert len(found) == len(set(found)), "a block was reported twice"
        expected = {b for b, (s, e) in enumerate(blocks) if s <= last and e >= first}
        assert set(found) == expected, (blocks, first, last)
