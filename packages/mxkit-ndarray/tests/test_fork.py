"""NDArrays made before os.fork() in the child process (DataLoader worker processes)."""

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = """
    import os
    import numpy as np
    import mxkit.ndarray as nd

    x = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 2
    view = x[1]
    big = nd.ones((512, 512))
    for _ in range(8):                                  # outputs over the in-flight bound (4 MiB)
        big = big + 1
    nd.waitall()
    pid = os.fork()
    if pid == 0:
        code = 0
        if not np.array_equal(y.asnumpy(), np.arange(6).reshape(2, 3) * 2):
            code = 10                                   # read a pre-fork result
        z = x + y                                       # an op over pre-fork arrays
        if not np.array_equal(z.asnumpy(), np.arange(6).reshape(2, 3) * 3):
            code = 11
        x += 1                                          # written in place in the child
        view[:] = 7                                     # and through a view of it
        if not np.array_equal(x.asnumpy(), [[1, 2, 3], [7, 7, 7]]):
            code = 12
        if not np.array_equal((x - y).asnumpy(), [[1, 0, -1], [1, -1, -3]]):
            code = 13
        for _ in range(8):
            big = big * 2
        if big[0, 0].asscalar() != 9 * 2 ** 8:
            code = 14
        nd.waitall()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    x += 10                                             # the parent's arrays: untouched by the child
    print("child", os.waitstatus_to_exitcode(status), "parent", x.asnumpy().ravel().tolist())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("engine_name", ["threaded_per_device", "naive"])
def test_arrays_made_before_a_fork_are_read_and_written_in_the_child(engine_name):
    # In a subprocess, so that forking never copies this test runner's threads.
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "MXKIT_ENGINE": engine_name})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["child", "0", "parent", "[10.0,", "11.0,", "12.0,", "13.0,", "14.0,", "15.0]"]
