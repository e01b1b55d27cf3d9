"""How values travel on the data channel: small arrays packed per dtype and cut by the sizes
the receiver knows, large ones and compressed tuples as they are; every count is checked."""

import socket
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.kvstore.dist import frames, wire
from mxkit.kvstore.dist.frames import ChannelError

pytestmark = pytest.mark.timeout(120)

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint8, np.bool_]


def _through_a_socket(layout, groups, arrays):
    left, right = socket.socketpair()
    with left, right:
        # a frame may be larger than the socket's buffer: it is sent while it is read
        sender = threading.Thread(target=frames.send_frame, args=(left, {"values": layout, "packed": groups}, arrays))
        sender.start()
        header, received = frames.receive_frame(right)
        sender.join()
    return header["values"], header["packed"], received


@st.composite
def payloads(draw):
    """Arrays of mixed dtypes and shapes (some over the packing bound), and compressed tuples."""
    values = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["small", "small", "large", "tuple", "scalar", "empty"]))
        dtype = draw(st.sampled_from(DTYPES))
        if kind == "small":
            shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
        elif kind == "large":
            shape = (wire.CHANNEL_PACK_MAX_BYTES // np.dtype(dtype).itemsize + draw(st.integers(1, 9)),)
        elif kind == "scalar":
            shape = ()
        elif kind == "empty":
            shape = (0, draw(st.integers(1, 3)))
        else:
            values.append((np.arange(3, dtype=np.uint8), np.array([1.5], np.float32)))
            continue
        seed = draw(st.integers(0, 2**16))
        values.append(np.asarray((np.random.default_rng(seed).normal(size=shape) * 9).astype(dtype)))
    return values


@settings(max_examples=40, deadline=None)
@given(payloads())
def test_packed_values_round_trip_exactly_with_the_shapes_the_receiver_knows(values):
    layout, groups, arrays = wire.flatten(values)
    assert groups == len({v.dtype for v in values if isinstance(v, np.ndarray)
                          and v.nbytes <= wire.CHANNEL_PACK_MAX_BYTES})
    shapes = [None if isinstance(v, tuple) else v.shape for v in values]
    got = wire.unflatten(*_through_a_socket(layout, groups, arrays), shapes.__getitem__)
    assert len(got) == len(values)
    for expected, value in zip(values, got, strict=True):
        if isinstance(expected, tuple):
            assert isinstance(value, tuple)
            for e, v in zip(expected, value, strict=True):
                np.testing.assert_array_equal(v, e)
        else:
            assert value.dtype == expected.dtype and value.shape == expected.shape
            np.testing.assert_array_equal(value, expected)


def test_a_hundred_small_keys_are_one_array_and_large_ones_are_not_copied():
    small = [np.full(256, i, np.float32) for i in range(100)]
    large = np.zeros(wire.CHANNEL_PACK_MAX_BYTES // 4 + 1, np.float32)
    layout, groups, arrays = wire.flatten([*small, large])
    assert groups == 1 and len(arrays) == 2
    assert layout == [wire.PACKED] * 100 + [wire.SINGLE]
    assert arrays[1] is large or np.shares_memory(arrays[1], large)


@pytest.mark.parametrize(("layout", "groups", "arrays", "message"), [
    ([wire.PACKED], 1, [np.zeros(2, np.float32)], "packed buffer 0 has 2 elements, fewer than its values need"),
    ([wire.PACKED], 1, [np.zeros(4, np.float32)], "packed buffer 0 has 4 elements, its values need 3"),
    ([wire.PACKED - 1], 1, [np.zeros(3, np.float32)], "an entry of 'values' is"),
    ([0], 0, [], "an entry of 'values' is"),
    ([True], 0, [np.zeros(3)], "an entry of 'values' is"),
    ([wire.PACKED], 2, [np.zeros(3, np.float32)], "'packed' must be an int from 0 to the frame's 1 arrays"),
    ([wire.PACKED], "1", [np.zeros(3, np.float32)], "'packed' must be an int"),
    ([wire.PACKED], 1, [np.zeros((3, 1), np.float32)], "a packed buffer is 1-D"),
    ([wire.SINGLE, wire.SINGLE], 0, [np.zeros(3)], "describes 2 separate arrays, the frame has 1"),
    ("all", 0, [], "'values' must be a list of ints"),
])
def test_a_layout_that_does_not_match_its_arrays_is_refused(layout, groups, arrays, message):
    with pytest.raises(ChannelError, match=message.replace("(", r"\(").replace("'", "'")):
        wire.unflatten(layout, groups, arrays, lambda index: (3,))
