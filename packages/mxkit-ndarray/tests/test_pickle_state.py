"""NDArray.__getstate__/__setstate__ in MXNet's format (one raw array record): states written
by MXNet 1.9.1 (fixtures/pickle_state/make_state_fixture.py) load, ours are byte-identical to
MXNet's, a GPU state loads on the CPU where there is no GPU, and bad states are clear errors."""

import os

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import FormatError, MXKitError

FIXTURES = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "pickle_state", "states.npz"))
NAMES = sorted(k[:-len("_state")] for k in FIXTURES.files if k.endswith("_state"))


@pytest.mark.parametrize("name", NAMES)
def test_mxnet_states_load_and_ours_are_identical(name):
    state, value = FIXTURES[name + "_state"].tobytes(), FIXTURES[name + "_value"]
    target = nd.zeros((1,))
    target.__setstate__({"handle": bytearray(state)})
    assert target.dtype == value.dtype and target.shape == value.shape
    np.testing.assert_array_equal(target.asnumpy(), value)
    assert bytes(nd.array(value, dtype=value.dtype).__getstate__()["handle"]) == state


def test_a_gpu_state_loads_on_the_cpu_without_gpus():
    # MXNet's state of mx.nd.arange(1, ctx=mx.gpu()): device type 2 (gpu), id 0
    state = bytearray(b"\xc9\xfa\x93\xf9\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"
                      b"\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
    array = nd.arange(3)
    array.__setstate__({"handle": state})
    np.testing.assert_array_equal(array.asnumpy(), [0.0])
    if not nd.zeros((1,)).context.device_type == "gpu":
        assert array.context.device_type == "cpu"


def test_bad_states_are_clear_errors():
    array = nd.zeros((2,))
    with pytest.raises(MXKitError, match="handle"):
        array.__setstate__({"data": b""})
    good = bytes(nd.ones((2,)).__getstate__()["handle"])
    with pytest.raises(FormatError, match="truncated"):
        array.__setstate__({"handle": good[:-3]})
    with pytest.raises(FormatError, match="follow the record"):
        array.__setstate__({"handle": good + b"\x00"})
    np.testing.assert_array_equal(array.asnumpy(), [0.0, 0.0])  # a failed load leaves the array as it was
