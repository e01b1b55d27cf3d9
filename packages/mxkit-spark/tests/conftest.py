"""One local Spark session (``local[2]``) and one loopback Ray cluster per test module.

Starting the JVM and Ray takes seconds each, so a module shares them; a test that needs
them is skipped, with the reason, when Java is not on PATH.
"""

import os
import shutil
import sys

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: starts a local Spark session (skipped without Java)")


@pytest.fixture(scope="module")
def spark():
    """A ``local[2]`` SparkSession bound to loopback, without its web UI."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime and no 'java' is on PATH (install Java 17 to run these tests)")
    pytest.importorskip("pyspark", reason="pip install mxkit-spark")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2]").appName("mxkit-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               # a barrier stage's allGather gives up instead of waiting a year (Spark's default)
               .config("spark.barrier.sync.timeout", "120")
               .config("spark.python.worker.reuse", "true").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def ray_cluster(spark):
    """A loopback Ray cluster shared by the module's fits (a fit reuses a connected cluster)."""
    import ray
    from mxkit.kvstore.dist import runtime

    # in a whole-suite run another package's session cluster may be up: reuse it, and leave it
    # running for the tests that own it
    started_here = not ray.is_initialized()
    address = runtime.init_ray(num_cpus=1)
    yield address
    if started_here:
        runtime.shutdown_ray()


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits as float32 ``(train_x, train_y, val_x, val_y)``: 1437 and 360 samples
    of 64 pixels scaled to [0, 1], split as ``mxkit train`` splits them."""
    sklearn = pytest.importorskip("sklearn.datasets", reason="the digits come with scikit-learn")
    import numpy as np

    data = sklearn.load_digits()
    images = (np.rint(data.images * (255.0 / 16.0)) / 255.0).astype(np.float32).reshape(len(data.images), -1)
    labels = data.target.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(images))
    cut = int(len(images) * 0.8)
    train, val = order[:cut], order[cut:]
    return images[train], labels[train], images[val], labels[val]
