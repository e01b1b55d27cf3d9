"""A hybridized call's backward pass hands its executor's gradient arrays to autograd
instead of copies (a gradient-sized set of arrays less at the peak), while staying correct
where those arrays could be overwritten before they are consumed."""

import numpy as np
from mxkit import mx
from mxkit.gluon import nn
from mxkit.ndarray import NDArray


def _pair(seed=0):
    """The same two-layer network twice: imperative (the reference) and hybridized."""
    nets = []
    for _ in range(2):
        net = nn.HybridSequential()
        with net.name_scope():
            net.add(nn.Dense(6, in_units=4, activation="tanh"), nn.Dense(3, in_units=6))
        net.initialize(mx.init.Xavier(rnd_type="gaussian"))
        nets.append(net)
    ref, hyb = nets
    for p_ref, p_hyb in zip(ref.collect_params().values(), hyb.collect_params().values()):
        p_hyb.set_data(p_ref.data())
    hyb.hybridize(static_alloc=True, static_shape=True)
    return ref, hyb


def _inputs(seed, rows=5):
    return mx.nd.array(np.random.RandomState(seed).rand(rows, 4).astype(np.float32))


def _grads(net):
    return [p.grad().asnumpy().copy() for p in net.collect_params().values()]


def test_hybridized_backward_copies_no_gradient(monkeypatch):
    ref, hyb = _pair()
    x = _inputs(0)
    for net in (ref, hyb):
        with mx.autograd.record():
            net(x).sum().backward()  # binds the executor outside the counted pass
    copied = []
    original = NDArray.copy

    def counting_copy(self, *args, **kwargs):
        copied.append(self.shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(NDArray, "copy", counting_copy)
    with mx.autograd.record():
        loss = (hyb(x) ** 2).sum()
    copied.clear()
    loss.backward()
    assert copied == []  # was one copy per parameter
    monkeypatch.undo()
    with mx.autograd.record():
        (ref(x) ** 2).sum().backward()
    for got, want in zip(_grads(hyb), _grads(ref)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_of_a_hybridized_block_returns_arrays_a_later_backward_leaves_alone():
    _, hyb = _pair()
    x = _inputs(1)
    x.attach_grad()
    with mx.autograd.record():
        y = (hyb(x) ** 2).sum()
    (first,) = mx.autograd.grad(y, [x])
    kept = first.asnumpy().copy()
    with mx.autograd.record():
        (hyb(x * 3) ** 2).sum().backward()  # the same executor, other gradients
    np.testing.assert_array_equal(first.asnumpy(), kept)


def test_a_retained_node_and_a_later_call_on_its_executor_in_one_backward_pass():
    """y1's node is kept (retain_graph) and its executor reused by the call making y2; one
    pass then differentiates both nodes: each must keep its own gradients."""
    ref, hyb = _pair()
    a, b = _inputs(2), _inputs(3)
    for net in (ref, hyb):
        with mx.autograd.record():
            y1 = (net(a) ** 2).sum()
        y1.backward(retain_graph=True)
        with mx.autograd.record():
            y2 = (net(b) ** 3).sum()
            total = y1 + y2
        total.backward()
    assert sum(len(pool) for pool in hyb._cached_runner.bindings.values()) == 1
    for got, want in zip(_grads(hyb), _grads(ref)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_executor_writes_parameter_gradients_into_their_own_grad_buffers():
    _, hyb = _pair()
    with mx.autograd.record():
        hyb(_inputs(4)).sum().backward()
    (binding,) = [b for pool in hyb._cached_runner.bindings.values() for b in pool]
    params = hyb.collect_params()
    assert binding.param_names
    assert all(binding.exe.grad_dict[name] is params[name].grad() for name in binding.param_names)


def test_grad_through_a_hybridized_block_leaves_the_grad_buffers_alone():
    ref, hyb = _pair()
    x = _inputs(5)
    x.attach_grad()  # grad() below then runs on the executor that backward() bound
    with mx.autograd.record():
        (hyb(x) ** 2).sum().backward()
    before = _grads(hyb)
    for net in (ref, hyb):
        with mx.autograd.record():
            y = (net(x * 2) ** 2).sum()
        (got,) = mx.autograd.grad(y, [x])
        if net is ref:
            want = got.asnumpy()
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
    for now, earlier in zip(_grads(hyb), before):
        np.testing.assert_array_equal(now, earlier)


def test_two_hybridized_blocks_sharing_parameters_in_one_pass_add_their_gradients():
    ref, hyb = _pair()
    twin = nn.HybridSequential(prefix=hyb.prefix, params=hyb.collect_params())
    with twin.name_scope():
        twin.add(nn.Dense(6, in_units=4, activation="tanh"), nn.Dense(3, in_units=6))
    twin.hybridize()
    a, b = _inputs(6), _inputs(7)
    for first, second in ((ref, ref), (hyb, twin)):
        with mx.autograd.record():
            ((first(a) ** 2).sum() + (second(b) ** 3).sum()).backward()
    for got, want in zip(_grads(hyb), _grads(ref)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_req_add_set_after_binding_accumulates():
    ref, hyb = _pair()
    x = _inputs(8)
    for net in (ref, hyb):
        with mx.autograd.record():
            net(x).sum().backward()  # hyb binds with grad_req "write"
        for param in net.collect_params().values():
            param.grad_req = "add"
        for _ in range(2):
            with mx.autograd.record():
                (net(x) ** 2).sum().backward()
    for got, want in zip(_grads(hyb), _grads(ref)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
