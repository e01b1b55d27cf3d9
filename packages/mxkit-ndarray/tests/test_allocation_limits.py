"""Arrays that cannot exist fail with an mxkit OutOfMemoryError naming the shape and size."""

import pytest
from mxkit.core.errors import MXKitError, OutOfMemoryError
from mxkit.ndarray.creation import empty, ones, zeros


@pytest.mark.parametrize("make", [zeros, empty, ones])
def test_an_impossible_shape_is_an_mxkit_error(make):
    with pytest.raises(OutOfMemoryError, match=r"shape \(1099511627776, 1099511627776\) and dtype float32 on "
                                               r"cpu\(0\): it needs 4194304\.0 EiB") as info:
        make((2**40, 2**40))
    assert isinstance(info.value, MXKitError) and isinstance(info.value, MemoryError)


def test_an_ordinary_array_still_works():
    assert zeros((3, 4)).asnumpy().sum() == 0
