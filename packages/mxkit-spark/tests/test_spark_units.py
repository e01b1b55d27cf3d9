"""The parts of mxkit-spark that need no JVM: column checks, row decoding, the partition's
files and iterator, the errors workers send back, and the Java check."""

import numpy as np
import pytest

pytest.importorskip("pyspark", reason="pip install mxkit-spark")


def schema(**types):
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(name, data_type) for name, data_type in types.items()])


def test_feature_kinds_come_from_the_schema():
    from mxkit.core.errors import DTypeError
    from mxkit.spark.columns import feature_kind
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import ArrayType, BinaryType, DoubleType, FloatType, StringType

    types = schema(v=VectorUDT(), a=ArrayType(FloatType()), b=BinaryType(), d=DoubleType(),
                   s=ArrayType(StringType()))
    assert [feature_kind(types, name) for name in "vab"] == ["vector", "array", "image"]
    with pytest.raises(DTypeError, match=r"'d' has type double; it must be a vector"):
        feature_kind(types, "d")
    with pytest.raises(DTypeError, match=r"'s' has type array<string>"):
        feature_kind(types, "s")


def test_vectors_and_arrays_decode_to_float32_and_sizes_are_checked():
    from mxkit.core.errors import ShapeError
    from mxkit.spark.columns import FeatureColumn, RowDecoder
    from pyspark.ml.linalg import Vectors

    decoder = RowDecoder(FeatureColumn("f", "vector", (4,)), "y")
    np.testing.assert_array_equal(decoder.sample(Vectors.sparse(4, [1, 3], [2.0, 5.0])), [0, 2, 0, 5])
    assert decoder.sample(Vectors.dense([1, 2, 3, 4])).dtype == np.float32
    with pytest.raises(ShapeError, match="has 3 values; every row must have 4"):
        decoder.sample(Vectors.dense([1, 2, 3]))
    with pytest.raises(ShapeError, match="null value"):
        decoder.sample(None)
    with pytest.raises(ShapeError, match="label column 'y' has a null value"):
        decoder.label_of(None)
    assert RowDecoder(FeatureColumn("f", "array", (2, 2)), "y").sample([1, 2, 3, 4]).shape == (4,)
    scaled = RowDecoder(FeatureColumn("f", "array", (2,), scale=0.5), "y").sample([2, 6])
    assert scaled.dtype == np.float32 and scaled.tolist() == [1.0, 3.0]


def test_image_bytes_decode_to_channels_first_and_other_shapes_fail():
    pytest.importorskip("cv2", reason="image columns decode with OpenCV (mxkit-io[image])")
    from mxkit.core.errors import ShapeError
    from mxkit.io.image import imencode
    from mxkit.spark.columns import FeatureColumn, RowDecoder, sample_of

    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    png = imencode(image, ".png")
    decoded = sample_of("image", png, "img")
    np.testing.assert_array_equal(decoded, image.transpose(2, 0, 1).astype(np.float32))
    decoder = RowDecoder(FeatureColumn("img", "image", (3, 3, 3)), "y")
    with pytest.raises(ShapeError, match=r"decodes to \(channels, height, width\) \(3, 2, 3\)"):
        decoder.sample(png)


def test_a_partition_streams_into_files_and_iterates_in_whole_batches(tmp_path):
    from mxkit.core.errors import ShapeError
    from mxkit.spark import partition_data
    from mxkit.spark.columns import FeatureColumn, RowDecoder

    rows = [{"f": [float(i), float(-i)], "y": i % 3} for i in range(11)]
    decoder = RowDecoder(FeatureColumn("f", "array", (2,)), "y")
    original = partition_data.CHUNK_ROWS
    partition_data.CHUNK_ROWS = 4  # several chunks appended
    try:
        spilled = partition_data.spill_rows(iter(rows), decoder, str(tmp_path))
    finally:
        partition_data.CHUNK_ROWS = original
    assert spilled.count == 11
    np.testing.assert_array_equal(spilled.samples[:, 0], np.arange(11))
    np.testing.assert_array_equal(spilled.labels, np.arange(11) % 3)
    batches = list(partition_data.partition_iterator(spilled, 4, rank=0))
    assert len(batches) == 2  # the incomplete last batch is dropped
    seen = np.concatenate([batch.data[0].asnumpy()[:, 0] for batch in batches])
    assert len(set(seen.tolist())) == 8 and set(seen.tolist()) <= set(range(11))
    with pytest.raises(ShapeError, match="worker rank 1 got 11 rows, fewer than one batch of 12"):
        partition_data.partition_iterator(spilled, 12, rank=1)


def test_a_workers_error_comes_back_as_its_mxkit_class():
    from mxkit.core.errors import MXKitError, ShapeError
    from mxkit.spark.worker import _tagged, error_from_spark

    tagged = _tagged(ShapeError("a row has 3 values\nevery row must have 4"), rank=1)
    spark_error = RuntimeError(f"Job aborted ... Traceback ... mxkit.core.errors.MXKitError: {tagged}\n\tat org...")
    error = error_from_spark(spark_error)
    assert type(error) is ShapeError
    assert str(error).startswith("worker rank 1 on ") and "a row has 3 values every row must have 4" in str(error)
    assert type(error_from_spark(RuntimeError(str(_tagged(ValueError("bad"), 0))))) is MXKitError
    assert error_from_spark(RuntimeError("Python worker exited unexpectedly")) is None


def test_missing_java_is_a_clear_error(monkeypatch, tmp_path):
    from mxkit.core.errors import MissingComponentError
    from mxkit.spark import check_java

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(MissingComponentError, match="Spark needs a Java runtime"):
        check_java()


def test_estimator_settings_are_checked_when_made(tmp_path):
    from mxkit.core.errors import ConfigError
    from mxkit.spark import Estimator

    with pytest.raises(ConfigError, match="kvstore must be one of dist_sync, dist_async, dist_ssp, got 'local'"):
        Estimator(None, str(tmp_path / "m"), kvstore="local")
    with pytest.raises(ConfigError, match="num_workers must be a positive int, got 0"):
        Estimator(None, str(tmp_path / "m"), num_workers=0)
    with pytest.raises(ConfigError, match="feature_scale must be a positive finite number, got 0"):
        Estimator(None, str(tmp_path / "m"), feature_scale=0)
    with pytest.raises(ConfigError, match="checkpoint_prefix must be a path prefix"):
        Estimator(None, "")


def test_a_gluon_block_becomes_a_softmax_symbol_and_a_starting_checkpoint(tmp_path):
    pytest.importorskip("mxkit.gluon", reason="pip install 'mxkit-spark[gluon]'")
    from mxkit.gluon import nn
    from mxkit.ndarray import array
    from mxkit.spark.estimator import _from_gluon
    from mxkit.train.model.checkpoint import load_checkpoint

    block = nn.HybridSequential()
    block.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    symbol, start = _from_gluon(block, (5,), str(tmp_path / "g"), "data")
    assert start == (str(tmp_path / "g"), 0)
    assert symbol.list_outputs() == ["softmax_output"]
    assert "softmax_label" in symbol.list_arguments()
    _, arg_params, _ = load_checkpoint(str(tmp_path / "g"), 0)
    # the checkpoint holds the block's own parameters: the Symbol with them computes the block's softmax
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    expected = block(array(x)).asnumpy()
    expected = np.exp(expected - expected.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    executor = symbol.bind(None, {"data": array(x), "softmax_label": array(np.zeros(4, np.float32)),
                                  **arg_params})
    np.testing.assert_allclose(executor.forward()[0].asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_a_network_that_is_neither_symbol_nor_block_is_refused(tmp_path):
    from mxkit.core.errors import ConfigError
    from mxkit.spark.estimator import _from_gluon

    with pytest.raises(ConfigError, match=r"network must be a Symbol or a Gluon HybridBlock.*got dict"):
        _from_gluon({}, (5,), str(tmp_path / "g"), "data")


def test_the_ray_token_a_plan_carries_stays_out_of_its_repr():
    from mxkit.spark.columns import FeatureColumn
    from mxkit.spark.worker import WorkerPlan

    plan = WorkerPlan(symbol_json="{}", features=FeatureColumn("f", "vector", (4,)), label="y", data_name="data",
                      label_name="softmax_label", kvstore="dist_sync", num_workers=2, namespace="ns",
                      address="127.0.0.1:1", task_env={"RAY_AUTH_TOKEN": "s3cr3t-token"}, batch_size=8,
                      begin_epoch=0, num_epoch=1, optimizer="sgd", optimizer_params={}, checkpoint_prefix="/p",
                      seed=1, timeout=5.0)
    assert "s3cr3t-token" not in repr(plan)
    assert plan.task_env["RAY_AUTH_TOKEN"] == "s3cr3t-token"
