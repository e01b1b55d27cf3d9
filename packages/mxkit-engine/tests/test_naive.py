"""The naive engine: runs at push, errors raise at push with the original chained."""

import threading

import mxkit.engine as engine
import pytest
from mxkit.core import cpu
from mxkit.core.errors import EngineError


@pytest.fixture
def naive():
    return engine.create("naive")


def test_push_runs_at_once_and_counts_writes(naive):
    a, b = naive.new_var(), naive.new_var()
    log = []
    naive.push(lambda: log.append(1), reads=(a,), writes=(b, b), ctx=cpu(0), name="one")
    assert log == [1]
    assert (a.version, b.version) == (0, 1)


def test_error_raises_at_push_with_name_and_cause(naive):
    var = naive.new_var()

    def boom():
        raise ValueError("bad shape (2, 3)")

    with pytest.raises(EngineError, match=r"'boom-op' failed: ValueError: bad shape \(2, 3\)") as info:
        naive.push(boom, writes=(var,), name="boom-op")
    assert isinstance(info.value.__cause__, ValueError)
    assert var.version == 0
    naive.push(lambda: None, writes=(var,))
    assert var.version == 1


def test_async_waits_for_completion_from_another_thread(naive):
    var = naive.new_var()
    naive.push_async(lambda done: threading.Timer(0.02, done).start(), writes=(var,))
    assert var.version == 1
    with pytest.raises(EngineError, match="KeyError"):
        naive.push_async(lambda done: done(KeyError("gone")), writes=(var,), name="io")


def test_delete_var_calls_back_and_forbids_use(naive):
    var = naive.new_var()
    called = []
    naive.delete_var(var, on_delete=lambda: called.append(True))
    assert called == [True]
    with pytest.raises(EngineError, match="deleted"):
        naive.push(lambda: None, reads=(var,))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fn": 3}, "needs a callable operation, got 3"),
        ({"reads": [object()]}, "vars made by this naive engine"),
        ({"writes": "x"}, "writes must be a tuple or list of vars, got 'x'"),
        ({"priority": 1.5}, "priority must be an int"),
        ({"ctx": "cpu"}, "ctx must be an mxkit.core.Context"),
    ],
)
def test_bad_arguments_raise_engine_error(naive, kwargs, message):
    args = {"fn": lambda: None, **kwargs}
    with pytest.raises(EngineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        naive.push(**args)


def test_var_of_another_engine_is_refused(naive):
    other = engine.create("naive").new_var()
    with pytest.raises(EngineError, match="vars made by this naive engine"):
        naive.push(lambda: None, writes=(other,))
