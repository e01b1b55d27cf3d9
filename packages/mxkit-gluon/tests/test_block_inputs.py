"""HybridBlock inputs as MXNet 1.9.1 takes them: None for absent optional arguments (imperative
and hybridized alike), numbers and lists when not hybridized, and clear errors for mixed
NDArrays and Symbols, numbers in a hybridized call, several devices and a changed argument
structure; plus split_data's uneven parts, clip_global_norm and Parameter.dtype."""

import warnings

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import BlockInputError, HybridBlock, nn, utils


class AddOptional(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=4)

    def hybrid_forward(self, F, a, b=None):
        out = self.dense(a)
        return out if b is None else out + b


class Pair(HybridBlock):
    def hybrid_forward(self, F, a, b):
        if a is None:
            return b * 2
        if b is None:
            return a * 3
        return a + b


@pytest.mark.parametrize("hybridize", [False, True])
def test_none_arguments_match_imperative(hybridize):
    x = mx.nd.array(np.arange(8, dtype=np.float32).reshape(2, 4))
    extra = mx.nd.ones((2, 3))
    reference = AddOptional()
    reference.initialize(mx.init.Xavier())
    block = AddOptional(params=reference.collect_params())
    if hybridize:
        block.hybridize()
    want = reference.dense(x).asnumpy()
    for _ in range(2):  # the second call runs the cached graph
        np.testing.assert_allclose(block(x).asnumpy(), want, rtol=1e-6)
        np.testing.assert_allclose(block(x, None).asnumpy(), want, rtol=1e-6)  # a trailing None: same graph
    if not hybridize:
        np.testing.assert_allclose(block(x, extra).asnumpy(), want + 1, rtol=1e-6)


@pytest.mark.parametrize("args, want", [((None, 2.0), 4.0), ((3.0, None), 9.0), ((1.0, 2.0), 3.0)])
def test_none_in_any_position_of_a_hybridized_call(args, want):
    block = Pair()
    block.hybridize()
    arrays = [None if a is None else mx.nd.full((2,), a) for a in args]
    np.testing.assert_allclose(block(*arrays).asnumpy(), [want, want])
    np.testing.assert_allclose(block(*arrays).asnumpy(), [want, want])


def test_a_changed_argument_structure_is_an_error_once_traced():
    block = Pair()
    block.hybridize()
    block(None, mx.nd.ones((2,)))
    with pytest.raises(BlockInputError, match=r"hybridized for arguments of structure \[-1, 0\]"):
        block(mx.nd.ones((2,)), mx.nd.ones((2,)))
    block.hybridize()  # traced anew
    np.testing.assert_allclose(block(mx.nd.ones((2,)), mx.nd.ones((2,))).asnumpy(), [2, 2])


def test_numbers_and_lists_pass_through_when_not_hybridized():
    class Summing(HybridBlock):
        def hybrid_forward(self, F, a, b):
            a = sum(a) if isinstance(a, list) else a
            b = sum(b) if isinstance(b, list) else b
            return a + b

    block = Summing()
    np.testing.assert_allclose(block(mx.nd.ones((3,)), 2).asnumpy(), [3, 3, 3])
    np.testing.assert_allclose(block([mx.nd.ones((3,)), mx.nd.ones((3,))], 1).asnumpy(), [3, 3, 3])


def test_bad_inputs_raise_clear_errors():
    block = Pair()
    with pytest.raises(BlockInputError, match="both NDArrays and Symbols"):
        block(mx.nd.ones((2,)), mx.sym.var("a"))
    with pytest.raises(BlockInputError, match="at least one NDArray or Symbol"):
        block(None, None)
    block.hybridize()
    with pytest.raises(BlockInputError, match="at least one NDArray or Symbol"):
        block(None, None)
    with pytest.raises(BlockInputError, match="NDArrays and None, got int"):
        block(mx.nd.ones((2,)), 1)
    with pytest.raises(BlockInputError, match="runs on one device"):
        block(mx.nd.ones((2,), ctx=mx.cpu(1)), mx.nd.ones((2,), ctx=mx.cpu(2)))
    assert issubclass(BlockInputError, ValueError)


@pytest.mark.parametrize("size, parts", [(33, 4), (33, 15), (10, 3), (8, 8)])
def test_uneven_split_matches_numpy_array_split(size, parts):
    x = np.arange(size * 2, dtype=np.float32).reshape(2, size)
    got = utils.split_data(mx.nd.array(x), parts, batch_axis=1, even_split=False)
    want = np.array_split(x, parts, axis=1)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.asnumpy(), w)


@pytest.mark.parametrize("stype", ["default", "row_sparse"])
def test_clip_global_norm_scales_in_place(stype):
    first = mx.nd.ones((3, 3)).tostype(stype)
    second = mx.nd.ones((4, 4)).tostype(stype)
    norm = utils.clip_global_norm([first, second], 1.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(first.asnumpy(), np.full((3, 3), 0.2), rtol=1e-6)
    np.testing.assert_allclose(second.asnumpy(), np.full((4, 4), 0.2), rtol=1e-6)
    # under the limit nothing changes, and without the finiteness check the norm stays an NDArray
    lazy = utils.clip_global_norm([first, second], 10.0, check_isfinite=False)
    np.testing.assert_allclose(lazy.asnumpy(), [1.0], rtol=1e-6)
    np.testing.assert_allclose(first.asnumpy(), np.full((3, 3), 0.2), rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        utils.clip_global_norm([mx.nd.array([1.0, np.nan])], 1.0)
    assert any("nan or inf" in str(w.message) for w in caught)


def test_parameter_dtype_compares_as_name_and_as_numpy_type(tmp_path):
    net = nn.Dense(4, in_units=4)
    net.initialize()
    assert net.weight.dtype == "float32" and net.weight.dtype == np.float32
    net.cast("float16")
    net.save_parameters(str(tmp_path / "half.params"))
    net.cast("float32")
    net.load_parameters(str(tmp_path / "half.params"), cast_dtype=True, dtype_source="saved")
    assert net.weight.dtype == np.float16 and net.weight.dtype == "float16"
    assert net.weight.data().dtype == np.float16


def test_check_sha1_and_download_find_local_files_only(tmp_path):
    import hashlib

    from mxkit.gluon import GluonError

    target = tmp_path / "weights.params"
    target.write_bytes(b"mxkit" * 100)
    digest = hashlib.sha1(target.read_bytes()).hexdigest()
    assert utils.check_sha1(str(target), digest) and utils.check_sha1(str(target), digest[:8])
    assert not utils.check_sha1(str(target), "0" * 40)
    url = "https://example.invalid/models/weights.params"
    assert utils.download(url, path=str(tmp_path), sha1_hash=digest) == str(target)
    assert utils.download(url, path=str(target)) == str(target)
    with pytest.raises(GluonError, match="mxkit downloads nothing; fetch the file yourself and save it as"):
        utils.download(url, path=str(tmp_path), sha1_hash="0" * 40)
    with pytest.raises(GluonError, match=r"other\.params"):
        utils.download("https://example.invalid/other.params", path=str(tmp_path))
