"""Random sampling with seeds, DLPack exchange, and mx.nd.save / mx.nd.load."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)


def test_seed_makes_every_sampler_reproducible():
    def draw():
        return [mx.nd.random.uniform(-2, 3, shape=(4, 5)), mx.nd.random.normal(1, 0.5, shape=(100,)),
                mx.nd.random.randint(0, 10, shape=(20,)), mx.nd.random.shuffle(mx.nd.arange(10)),
                mx.random.uniform(shape=(2,))]

    mx.random.seed(7)
    first = [a.asnumpy() for a in draw()]
    mx.random.seed(7)
    second = [a.asnumpy() for a in draw()]
    mx.random.seed(8)
    third = [a.asnumpy() for a in draw()]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], third[0])


def test_sample_ranges_dtypes_and_moments():
    mx.random.seed(3)
    u = mx.nd.random.uniform(-2, 3, shape=(20000,)).asnumpy()
    assert u.dtype == np.float32 and u.min() >= -2 and u.max() < 3
    assert abs(u.mean() - 0.5) < 0.05
    n = mx.nd.random.normal(1, 0.5, shape=(20000,), dtype="float64").asnumpy()
    assert n.dtype == np.float64 and abs(n.mean() - 1) < 0.02 and abs(n.std() - 0.5) < 0.02
    r = mx.nd.random.randint(3, 7, shape=(1000,))
    assert r.dtype == np.int32 and set(np.unique(r.asnumpy())) == {3, 4, 5, 6}
    s = mx.nd.random.shuffle(mx.nd.arange(50)).asnumpy()
    assert sorted(s.tolist()) == list(range(50)) and s.tolist() != list(range(50))
    out = mx.nd.zeros((3, 3))
    mx.nd.random.uniform(out=out)
    assert out.asnumpy().std() > 0


def test_seed_per_device_and_bad_seed():
    mx.random.seed(11, ctx=mx.cpu(1))
    a = mx.nd.random.uniform(shape=(4,), ctx=mx.cpu(1)).asnumpy()
    mx.random.seed(11, ctx=mx.cpu(1))
    b = mx.nd.random.uniform(shape=(4,), ctx=mx.cpu(1)).asnumpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(MXKitError, match="seed must be an int"):
        mx.random.seed("42")
    with pytest.raises(MXKitError, match="low < high"):
        mx.nd.random.randint(5, 5, shape=(2,))


def test_dlpack_with_numpy_is_zero_copy_both_ways():
    x = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x += 1
    shared = np.from_dlpack(x)  # waits for the pending write
    np.testing.assert_array_equal(shared, np.arange(1, 7).reshape(2, 3))
    x[0, 0] = 100
    x.wait_to_read()
    assert shared[0, 0] == 100
    host = np.arange(4, dtype=np.float64)
    y = mx.nd.from_dlpack(host)
    assert y.dtype == np.float64 and y.context == mx.cpu(0)
    host[1] = -5
    assert y.asnumpy()[1] == -5
    z = mx.nd.from_dlpack(x.to_dlpack_for_read())  # a bare capsule, as MXNet hands them out
    assert z.asnumpy()[0, 0] == 100 and np.shares_memory(z._data, x._data)
    assert x.__dlpack_device__() == (1, 0)
    w = mx.nd.from_dlpack(mx.nd.ones((2,)).to_dlpack_for_write())
    assert w.asnumpy().tolist() == [1, 1]
    with pytest.raises(MXKitError, match="__dlpack__"):
        mx.nd.from_dlpack([1, 2, 3])


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    x = mx.nd.array([1.0, 2.0, 3.0])
    t = torch.from_dlpack(x)
    t[0] = 9
    assert x.asnumpy()[0] == 9
    back = mx.nd.from_dlpack(torch.arange(3, dtype=torch.float32))
    assert back.asnumpy().tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool",
                                   "int16", "uint16", "uint32", "uint64"])
def test_save_load_round_trip_every_dtype(tmp_path, dtype):
    data = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    path = str(tmp_path / "arrays.params")
    mx.nd.save(path, {"w": mx.nd.array(data, dtype=dtype), "empty": mx.nd.zeros((0, 2), dtype=dtype)})
    loaded = mx.nd.load(path)
    assert set(loaded) == {"w", "empty"}
    assert loaded["w"].dtype == np.dtype(dtype).type
    np.testing.assert_array_equal(loaded["w"].asnumpy(), data)
    assert loaded["empty"].shape == (0, 2)


def test_save_load_list_and_single(tmp_path):
    path = str(tmp_path / "list.nd")
    arrays = [mx.nd.arange(5), mx.nd.ones((2, 2), dtype="int32")]
    mx.nd.save(path, arrays)
    loaded = mx.nd.load(path)
    assert isinstance(loaded, list) and len(loaded) == 2
    for got, ref in zip(loaded, arrays):
        np.testing.assert_array_equal(got.asnumpy(), ref.asnumpy())
    mx.nd.save(path, mx.nd.ones((3,)))
    assert mx.nd.load(path)[0].asnumpy().tolist() == [1, 1, 1]
    with open(path, "rb") as handle:
        assert mx.nd.load_frombuffer(handle.read())[0].shape == (3,)


def test_save_rejects_non_ndarrays(tmp_path):
    with pytest.raises(MXKitError, match="item 1 is a ndarray"):
        mx.nd.save(str(tmp_path / "x"), [mx.nd.ones((1,)), np.ones(1)])
    with pytest.raises(MXKitError, match="dict of str -> NDArray"):
        mx.nd.save(str(tmp_path / "x"), {1: mx.nd.ones((1,))})


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name", ["named_dict.params", "dtypes_list.params"])
def test_mxnet_written_files_load_as_ndarrays_and_save_back_byte_identical(tmp_path, name):
    expected = np.load(FIXTURES / "expected.npz", allow_pickle=False)
    loaded = mx.nd.load(str(FIXTURES / name))
    items = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
    for key, array in items:
        assert isinstance(array, mx.nd.NDArray) and array.context == mx.cpu(0)
        reference = expected[f"{name}/{key}"]
        assert array.dtype == reference.dtype.type
        np.testing.assert_array_equal(array.asnumpy(), reference)
    out = tmp_path / name
    mx.nd.save(str(out), loaded)
    assert out.read_bytes() == (FIXTURES / name).read_bytes()


def test_devices_draw_different_streams_from_one_seed():
    mx.random.seed(5)
    a = mx.nd.random.uniform(shape=(6,), ctx=mx.cpu(0)).asnumpy()
    b = mx.nd.random.uniform(shape=(6,), ctx=mx.cpu(1)).asnumpy()
    assert not np.array_equal(a, b)


def test_seed_applies_to_devices_first_used_after_it():
    mx.random.seed(9)
    first = mx.nd.random.normal(shape=(4,), ctx=mx.cpu(7)).asnumpy()
    from mxkit.ndarray import random as nd_random

    del nd_random._states[mx.cpu(7)]  # as if cpu(7) had never been used
    mx.random.seed(9)
    second = mx.nd.random.normal(shape=(4,), ctx=mx.cpu(7)).asnumpy()
    np.testing.assert_array_equal(first, second)
