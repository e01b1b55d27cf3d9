"""The outputs of a failed operation stay poisoned until they are overwritten: every read,
wait and dependent operation raises the original error (naming the operation), whichever
thread reports first, and ``waitall`` reports each failure once without clearing them."""

from __future__ import annotations

import threading

import mxkit.engine as engine
import numpy as np
import pytest
from mxkit.core.errors import EngineError
from mxkit.ndarray import operator as op_api
from mxkit.ndarray.creation import array, ones, waitall, zeros
from mxkit.ndarray.invoke import invoke_by_name

ENGINES = ["naive", "threaded", "threaded_per_device"]


@pytest.fixture(params=ENGINES)
def engine_name(request):
    previous = engine.set_engine(engine.create(request.param))
    try:
        yield request.param
    finally:
        if previous is None:  # the test's engine must not outlive it: the next get() builds the configured one
            try:
                engine.reset()
            except EngineError:
                pass
        current = engine.set_engine(previous) if previous is not None else None
        if current is not None and current is not previous:
            try:
                current.wait_all()
            except EngineError:
                pass


class Broken(op_api.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        raise RuntimeError("forward of broken exploded")

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise AssertionError("never called")


@op_api.register("test_failed_outputs_broken")
class BrokenProp(op_api.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return Broken()


def failing_take(out=None):
    """An out-of-range take: fails inside its kernel, on the engine."""
    rows = ones((3, 4))
    return invoke_by_name("take", rows, array([0, 7]), mode="raise", out=out)


def fail_into(target):
    """Make the op writing ``target`` fail; the naive engine raises at the push."""
    try:
        failing_take(out=target)
    except EngineError as exc:
        assert engine.get().name == "naive"
        assert "'take' failed" in str(exc)


def test_every_read_of_a_failed_output_raises_even_after_waitall(engine_name):
    y = zeros((2, 4))
    fail_into(y)
    for _ in range(3):
        with pytest.raises(EngineError, match=r"'take' failed: OperatorError: take\(mode=raise\)") as info:
            y.asnumpy()
        assert isinstance(info.value.__cause__, Exception)
    waitall()  # reported already (by the reads, or the naive push)
    with pytest.raises(EngineError, match="'take' failed"):
        y.wait_to_read()
    with pytest.raises(EngineError, match="'take' failed"):
        y.wait_to_write()  # waits too, and does not clear it


def test_waitall_reports_the_failure_once_and_the_output_stays_poisoned():
    previous = engine.set_engine(engine.create("threaded", num_workers=2))
    try:
        y = failing_take()
        with pytest.raises(EngineError, match="'take' failed"):
            waitall()
        waitall()  # once
        with pytest.raises(EngineError, match="'take' failed"):
            y.asnumpy()  # never uninitialised memory
    finally:
        engine.set_engine(previous)


def test_dependent_ops_and_in_place_updates_inherit_and_an_overwrite_clears(engine_name):
    y = zeros((2, 4))
    fail_into(y)
    try:
        z = y + 1  # a dependent op
    except EngineError as exc:  # (naive: at the push)
        assert "'take' failed" in str(exc)
    else:
        with pytest.raises(EngineError, match="'take' failed"):
            z.asnumpy()
    try:
        y += 1  # an in-place update reads the failed data: skipped
    except EngineError:
        pass
    try:
        y[0] = 5.0  # a partial write leaves the rest of the failed data
    except EngineError:
        pass
    with pytest.raises(EngineError, match="'take' failed"):
        y.asnumpy()
    y[:] = 3.0  # overwritten whole: usable again
    np.testing.assert_array_equal(y.asnumpy(), np.full((2, 4), 3.0, np.float32))
    np.testing.assert_array_equal((y + 1).asnumpy(), np.full((2, 4), 4.0, np.float32))


def test_a_failed_custom_forward_poisons_its_output(engine_name):
    x = ones((2, 3))
    try:
        y = invoke_by_name("Custom", x, op_type="test_failed_outputs_broken")
    except EngineError as exc:
        assert engine_name == "naive" and "forward of broken exploded" in str(exc)
        return
    try:
        waitall()
    except EngineError:
        pass
    with pytest.raises(EngineError, match="forward of broken exploded"):
        y.asnumpy()


@pytest.mark.parametrize("name", ["threaded", "threaded_per_device"])
def test_a_reader_and_a_waitall_racing_never_lose_the_error(name):
    previous = engine.set_engine(engine.create(name, num_workers=2))
    try:
        for _ in range(200):
            y = failing_take()
            start = threading.Barrier(2)
            outcome = {}

            def reader(y=y, start=start, outcome=outcome):
                start.wait()
                try:
                    y.asnumpy()
                    outcome["reader"] = "no error"
                except EngineError as exc:
                    outcome["reader"] = str(exc)

            def waiter(start=start, outcome=outcome):
                start.wait()
                try:
                    waitall()
                    outcome["waitall"] = None
                except EngineError as exc:
                    outcome["waitall"] = str(exc)

            threads = [threading.Thread(target=reader), threading.Thread(target=waiter)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            assert "'take' failed" in outcome["reader"]
            # waitall raises it unless the reader reported it first; never something else
            assert outcome["waitall"] is None or "'take' failed" in outcome["waitall"]
            waitall()  # nothing left to report
            with pytest.raises(EngineError, match="'take' failed"):
                y.asnumpy()
    finally:
        engine.set_engine(previous)
