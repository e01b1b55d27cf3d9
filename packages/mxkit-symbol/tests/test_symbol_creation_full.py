"""``mx.sym.full(shape, val, dtype=None)`` takes the fill value second, as MXNet's and ``mx.nd.full`` do."""

import numpy as np
import pytest


@pytest.mark.parametrize(("args", "kwargs", "dtype"), [
    (((2, 3), 5.5), {}, np.float32),
    (((2, 3),), {"val": 5.5}, np.float32),
    (((2, 3), 5.5), {"dtype": "float64"}, np.float64),
])
def test_full_fills_with_its_second_argument(args, kwargs, dtype):
    import mxkit.symbol as sym
    from mxkit.core.context import cpu

    out = sym.full(*args, **kwargs, name="filled")
    exe = out.simple_bind(cpu(), grad_req="null")
    result = exe.forward()[0].asnumpy()
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, np.full((2, 3), 5.5, dtype=dtype))
