"""Executors on a device that records its kernels (``Backend.record``, CUDA graphs on a GPU).

The CPU backend cannot record, so these tests give its class a ``record`` that keeps ``run``
and calls it again at every replay: the executor's part (when it asks, what it replays, what
it does when the backend refuses) is then checked against an executor that never records,
step for step, on the same arrays' values. The CUDA plugin's tests record real graphs.
"""

from __future__ import annotations

import numpy as np
import pytest
from mxkit import symbol as sym
from mxkit.core import config, cpu
from mxkit.ndarray.backend import backend_of


class _Replays:
    """A recording that replays by running the recorded steps again (what a graph does on a GPU)."""

    def __init__(self, run, log):
        self.run, self.log = run, log

    def __call__(self):
        self.log.append("replay")
        self.run()


@pytest.fixture
def recording_cpu(monkeypatch):
    """The CPU backend made able to record; returns the log of record and replay calls."""
    log: list[str] = []

    def record(self, run):
        log.append("record")
        return _Replays(run, log)

    monkeypatch.setattr(type(backend_of(cpu(0))), "record", record)
    return log


def _net():
    data = sym.Variable("data")
    net = sym.FullyConnected(data, num_hidden=6, name="fc1")
    net = sym.BatchNorm(net, fix_gamma=False, name="bn")
    net = sym.Activation(net, act_type="tanh")
    net = sym.FullyConnected(net, num_hidden=3, name="fc2")
    return sym.SoftmaxOutput(net, name="softmax")


def _bind(net, seed=0):
    ex = net.simple_bind(cpu(0), data=(5, 4), softmax_label=(5,))
    rng = np.random.default_rng(seed)
    for name, array in ex.arg_dict.items():
        if name not in ("data", "softmax_label"):
            array[:] = rng.standard_normal(array.shape).astype(np.float32) * 0.5
    return ex


def _train(ex, steps, seed=1):
    """SGD steps on fresh data each step; the outputs of every step and the final state."""
    rng = np.random.default_rng(seed)
    outputs = []
    for _ in range(steps):
        ex.arg_dict["data"][:] = rng.standard_normal((5, 4)).astype(np.float32)
        ex.arg_dict["softmax_label"][:] = rng.integers(0, 3, 5).astype(np.float32)
        outputs.append(ex.forward(is_train=True)[0].asnumpy())
        ex.backward()
        for name, grad in ex.grad_dict.items():
            if name not in ("data", "softmax_label"):
                ex.arg_dict[name][:] -= grad * 0.1
    state = {n: a.asnumpy() for n, a in {**ex.arg_dict, **ex.aux_dict}.items()}
    return outputs, state


def test_phases_record_on_their_second_run_and_replay_after(recording_cpu):
    with config.override(exec_record=False):
        want_outputs, want_state = _train(_bind(_net()), 4)
    ex = _bind(_net())
    got_outputs, got_state = _train(ex, 4)
    # forward and backward: run once as segments, recorded at the second run, replayed from then on
    assert recording_cpu.count("record") == 2
    assert recording_cpu.count("replay") == 2 * 3
    assert ex.recorded_phases == ["forward (training)", "backward (training)"]
    for want, got in zip(want_outputs, got_outputs):
        np.testing.assert_array_equal(got, want)
    for name in want_state:
        np.testing.assert_array_equal(got_state[name], want_state[name], err_msg=name)


def test_prediction_records_apart_from_training(recording_cpu):
    ex = _bind(_net())
    data = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    ex.arg_dict["data"][:] = data
    first = ex.forward(is_train=False)[0].asnumpy()
    assert recording_cpu == []
    second = ex.forward(is_train=False)[0].asnumpy()
    ex.arg_dict["data"][:] = data * 2  # a replay reads the bound arrays' new values
    third = ex.forward(is_train=False)[0].asnumpy()
    assert recording_cpu == ["record", "replay", "replay"]
    assert ex.recorded_phases == ["forward (prediction)"]
    np.testing.assert_array_equal(second, first)
    with config.override(exec_record=False):
        reference = _bind(_net())
    reference.arg_dict["data"][:] = data * 2
    np.testing.assert_array_equal(third, reference.forward(is_train=False)[0].asnumpy())


def test_a_refused_recording_runs_the_steps_and_the_phase_goes_back_to_segments(monkeypatch):
    asked: list[str] = []

    def refuse(self, run):
        asked.append("record")
        return None

    monkeypatch.setattr(type(backend_of(cpu(0))), "record", refuse)
    with config.override(exec_record=False):
        want_outputs, want_state = _train(_bind(_net()), 3)
    ex = _bind(_net())
    got_outputs, got_state = _train(ex, 3)
    forward, backward = len(ex._forward_steps), len(ex._backward_steps)
    # each phase once whole, then each of its steps alone; never again after that
    assert len(asked) == 2 + forward + backward
    assert ex.recorded_phases == []
    assert len(ex.unrecorded_nodes) == forward + backward
    assert ex.unrecorded_nodes[0].startswith("forward (training): fc1 (FullyConnected)")
    for want, got in zip(want_outputs, got_outputs):
        np.testing.assert_array_equal(got, want)
    for name in want_state:
        np.testing.assert_array_equal(got_state[name], want_state[name], err_msg=name)


class _Refused(Exception):
    pass


def test_steps_the_device_cannot_record_run_between_the_replays(monkeypatch):
    """tanh's kernel stands for one that reads the device back: the backend refuses any recording
    that runs it, and the other nodes replay in recordings around it."""
    import threading

    from mxkit.ndarray.kernels import get_op

    recording = threading.local()
    op = get_op("Activation")
    backend_name = backend_of(cpu(0)).name
    kernel = op.kernel_for(backend_name)

    def activation(xp, inputs, outputs, params):
        if getattr(recording, "on", False):
            raise _Refused("reads the device back")
        kernel(xp, inputs, outputs, params)

    log: list[str] = []

    def record(self, run):
        # this net's kernels are pure (no BatchNorm), so running them while "recording" is harmless
        recording.on = True
        try:
            run()
        except Exception:
            log.append("refused")
            return None
        finally:
            recording.on = False
        log.append("record")
        return _Replays(run, log)

    def net():
        data = sym.Variable("data")
        hidden = sym.Activation(sym.FullyConnected(data, num_hidden=6, name="fc1"), act_type="tanh", name="act")
        return sym.SoftmaxOutput(sym.FullyConnected(hidden, num_hidden=3, name="fc2"), name="softmax")

    monkeypatch.setitem(op.kernels, backend_name, activation)
    with config.override(exec_record=False):
        want_outputs, want_state = _train(_bind(net()), 4)
    monkeypatch.setattr(type(backend_of(cpu(0))), "record", record)
    ex = _bind(net())
    got_outputs, got_state = _train(ex, 4)
    assert ex.recorded_phases == ["forward (training)", "backward (training)"]
    assert ex.unrecorded_nodes == ["forward (training): act (Activation)"]
    for want, got in zip(want_outputs, got_outputs):
        np.testing.assert_array_equal(got, want)
    for name in want_state:
        np.testing.assert_array_equal(got_state[name], want_state[name], err_msg=name)


def test_split_into_recordings_keeps_order_and_merges_unrecorded_neighbours():
    from mxkit.symbol.recording import split_into_recordings

    seen: list[str] = []

    def run_steps(steps):
        seen.extend(steps)

    def record(fn):
        seen.clear()
        fn()
        if any(name.startswith("x") for name in seen):
            return None
        return tuple(seen)  # stands for the recording: the steps it holds

    pieces = split_into_recordings(record, ["a", "b", "x1", "c", "x2", "x3", "d", "e"], run_steps)
    assert pieces == [(("a", "b"), ["a", "b"]), (None, ["x1"]), (("c",), ["c"]), (None, ["x2", "x3"]),
                      (("d", "e"), ["d", "e"])]
    assert split_into_recordings(record, ["a", "b"], run_steps) == [(("a", "b"), ["a", "b"])]
    assert split_into_recordings(record, ["x"], run_steps) == [(None, ["x"])]
    assert split_into_recordings(record, ["x", "y"], run_steps) == [(None, ["x"]), (("y",), ["y"])]


def test_random_operators_and_monitors_never_record(recording_cpu):
    net = sym.Dropout(sym.FullyConnected(sym.Variable("data"), num_hidden=3, name="fc"), p=0.5)
    ex = net.simple_bind(cpu(0), data=(5, 4))
    for _ in range(3):
        ex.forward(is_train=True)
        ex.backward(ex.outputs[0])
    ex.outputs[0].wait_to_read()
    assert recording_cpu == [] and ex.recorded_phases == []

    seen: list[str] = []
    ex = _bind(_net())
    ex.set_monitor_callback(lambda name, array: seen.append(name))
    for _ in range(3):
        ex.forward(is_train=True)
    ex.outputs[0].wait_to_read()
    assert recording_cpu == [] and seen


def test_config_off_never_asks_the_backend(recording_cpu):
    with config.override(exec_record=False):
        ex = _bind(_net())
    _train(ex, 3)
    assert recording_cpu == []
