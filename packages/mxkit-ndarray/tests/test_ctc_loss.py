"""CTCLoss against a brute-force sum over every alignment (tiny sizes), its gradient against
finite differences, the blank conventions, the length inputs, and bad labels."""

from __future__ import annotations

import itertools
import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness


def brute_force_nll(acts, label, blank):
    """-log sum over all paths that collapse (merge repeats, drop blanks) to label."""
    logp = acts - np.log(np.exp(acts).sum(-1, keepdims=True))
    total = 0.0
    for path in itertools.product(range(acts.shape[1]), repeat=acts.shape[0]):
        merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
        if [c for c in merged if c != blank] == list(label):
            total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
    return -np.log(total)


ACTS = np.random.default_rng(0).normal(size=(5, 2, 4))


def test_loss_is_the_sum_over_alignments():
    labels = np.array([[1, 2, 0], [3, 3, 0]], dtype=np.float64)  # blank first: 0 pads
    loss = harness.run("CTCLoss", [ACTS, labels])[0]
    np.testing.assert_allclose(loss, [brute_force_nll(ACTS[:, 0], [1, 2], 0),
                                      brute_force_nll(ACTS[:, 1], [3, 3], 0)], rtol=1e-10)
    last = np.array([[0, 1, -1], [2, -1, -1]], dtype=np.float64)  # blank last (class 3): -1 pads
    loss = harness.run("CTCLoss", [ACTS, last], blank_label="last")[0]
    np.testing.assert_allclose(loss, [brute_force_nll(ACTS[:, 0], [0, 1], 3),
                                      brute_force_nll(ACTS[:, 1], [2], 3)], rtol=1e-10)


def test_length_inputs_limit_steps_and_labels_and_ignore_what_lies_beyond():
    acts = ACTS.copy()
    acts[3:, 1] = np.nan  # past sequence 1's length: never read
    labels = np.array([[1, 2, 3], [2, 1, 1]], dtype=np.float64)
    inputs = [acts, labels, np.array([5.0, 3.0]), np.array([2.0, 1.0])]
    params = {"use_data_lengths": True, "use_label_lengths": True}
    loss = harness.run("CTCLoss", inputs, **params)[0]
    np.testing.assert_allclose(loss, [brute_force_nll(ACTS[:, 0], [1, 2], 0),
                                      brute_force_nll(ACTS[:3, 1], [2], 0)], rtol=1e-10)
    grad = harness.gradients("CTCLoss", inputs, [np.ones(2)], **params)[0]
    assert np.isfinite(grad).all() and (grad[3:, 1] == 0).all()


def test_gradient_matches_finite_differences():
    labels = np.array([[1, 2, 0], [3, 1, 2]], dtype=np.float64)
    harness.check_gradient("CTCLoss", [ACTS, labels], wrt=[0], rtol=1e-6, atol=1e-8)


def test_ndarray_and_contrib_names_share_the_operator():
    data, label = nd.array(ACTS), nd.array([[1, 2, 0], [3, 3, 0]])
    for function in (nd.CTCLoss, nd.ctc_loss, nd.contrib.CTCLoss, nd.contrib.ctc_loss):
        np.testing.assert_allclose(function(data, label).asnumpy(), nd.CTCLoss(data, label).asnumpy())


def lattice_nll(acts, label, blank):
    """-log of the sum over every path through the extended label's positions (warp-ctc's
    lattice: stay, step one, or skip a blank position unless the target holds the blank's
    value or repeats the label two back), enumerated one path at a time."""
    logp = acts - np.log(np.exp(acts).sum(-1, keepdims=True))
    extended = [blank]
    for c in label:
        extended += [c, blank]
    size, steps = len(extended), acts.shape[0]
    total = 0.0
    for moves in itertools.product((0, 1, 2), repeat=steps - 1):
        for start in (0, 1):
            states, ok = [start], start < size
            for move in moves:
                s = states[-1] + move
                if s >= size or (move == 2 and (extended[s] == blank or extended[s] == extended[s - 2])):
                    ok = False
                    break
                states.append(s)
            if ok and states[-1] >= size - 2:
                total += np.exp(sum(logp[t, extended[s]] for t, s in enumerate(states)))
    return -np.log(total)


def test_labels_may_hold_the_blank_index_as_in_mxnet():
    # MXNet's Gluon CTCLoss passes blank_label="last" and MXNet's tests give labels that use
    # class C - 1: the recursion runs over label positions (warp-ctc's lattice).
    labels = np.array([[3, 2, 2], [2, 3, -1]], dtype=np.float64)
    loss = harness.run("CTCLoss", [ACTS, labels], blank_label="last")[0]
    np.testing.assert_allclose(loss, [lattice_nll(ACTS[:, 0], [3, 2, 2], 3),
                                      lattice_nll(ACTS[:, 1], [2, 3], 3)], rtol=1e-10)
    # the lattice reference agrees with the alignment sum where both apply
    np.testing.assert_allclose(lattice_nll(ACTS[:, 0], [1, 0], 3), brute_force_nll(ACTS[:, 0], [1, 0], 3))
    harness.check_gradient("CTCLoss", [ACTS, labels], wrt=[0], rtol=1e-6, atol=1e-8, blank_label="last")
    # MXNet 1.9.1 (test_loss.test_ctc_loss): uniform activations, labels [2, 1] and [3, 2, 2]
    uniform = nd.CTCLoss(nd.ones((20, 2, 4)), nd.array([[2, 1, 2, 2], [3, 2, 2, 2]]), nd.array([2, 3]),
                         use_label_lengths=True, blank_label="last")
    np.testing.assert_allclose(uniform.asnumpy(), [18.82820702, 16.50581741], rtol=1e-5)


def test_bad_labels_and_shapes_fail_clearly():
    with pytest.raises(MXKitError, match=r"holds \[1, 5\]; classes must lie in \[0, 4\)"):
        nd.CTCLoss(nd.array(ACTS), nd.array([[1, 5, 0], [1, 0, 0]])).asnumpy()
    with pytest.raises(MXKitError, match=r"\(sequence length, batch, classes\)"):
        nd.CTCLoss(nd.ones((5, 4)), nd.ones((5, 2)))
