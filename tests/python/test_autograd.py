"""Autograd from Python: backward, grad, hooks, grad modes, inference mode; gradients against
PyTorch's for the same function in f64."""

import pytest

import sinter


def test_backward_matches_pytorch(torch):
    data = [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]
    x = sinter.tensor(data, dtype=sinter.float64, requires_grad=True)
    tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    for lib, v in ((sinter, x), (torch, tx)):
        y = ((v * v).sigmoid() @ v.t()).tanh().sum() + (v.exp() / 3).mean() + v.prod(dim=1).sum()
        y.backward()
    got, want = x.grad.flatten().tolist(), tx.grad.flatten().tolist()
    assert got == pytest.approx(want, rel=1e-12)
    assert x.is_leaf and x.grad.shape == (2, 3)


def test_grad_accumulates_and_resets():
    x = sinter.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]
    x.grad = None
    assert x.grad is None
    y = x * 2
    y.backward(sinter.tensor([1.0, 0.0, -1.0]))
    assert x.grad.tolist() == [2.0, 0.0, -2.0]
    sinter.autograd.backward([(x * x).sum()], None)
    assert x.grad.tolist() == [4.0, 2.0, 0.0]


def test_hooks_see_and_replace_the_gradient():
    x = sinter.ones(2, requires_grad=True)
    seen = []
    y = x * 3
    y.register_hook(lambda g: seen.append(g.tolist()))
    z = y * 2
    z.register_hook(lambda g: g * 10)
    z.sum().backward()
    assert seen == [[20.0, 20.0]]
    assert x.grad.tolist() == [60.0, 60.0]


def test_grad_modes():
    x = sinter.ones(2, requires_grad=True)
    with sinter.no_grad():
        assert not (x * 2).requires_grad
        with sinter.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @sinter.no_grad()
    def f(v):
        return v * 2

    assert not f(x).requires_grad and sinter.is_grad_enabled()
    with sinter.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert sinter.is_grad_enabled()
    with sinter.inference_mode():
        y = x * 2
        assert sinter.is_inference_mode_enabled() and not y.requires_grad and y.is_inference()
    assert not sinter.is_inference_mode_enabled()
    with pytest.raises(RuntimeError, match="in-place"):
        x.zero_()
    with sinter.no_grad():
        x.mul_(3)
    assert x.tolist() == [3.0, 3.0]


def test_printing_names_the_graph():
    x = sinter.ones(2, requires_grad=True)
    assert repr(x * 2).startswith("tensor([2., 2.], grad_fn=<")


def test_autograd_grad_matches_pytorch_and_leaves_grad_alone(torch):
    data = [[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]]
    results = []
    for lib in (sinter, torch):
        x = lib.tensor(data, dtype=lib.float64, requires_grad=True)
        w = lib.tensor([0.3, -0.2, 0.7], dtype=lib.float64, requires_grad=True)
        h = (x * w).tanh()  # a non-leaf input: the gradient is taken there
        y = (h.exp() * x).sum(dim=1)
        seed = lib.tensor([1.0, -2.0], dtype=lib.float64)
        gh, gx = lib.autograd.grad(y, (h, x), seed, retain_graph=True)
        (gw,) = lib.autograd.grad([y.sum()], [w])
        assert x.grad is None and w.grad is None
        results.append([gh.flatten().tolist(), gx.flatten().tolist(), gw.tolist()])
    for got, want in zip(*results):
        assert got == pytest.approx(want, rel=1e-12)


def test_autograd_grad_unused_inputs_and_errors():
    x = sinter.ones(2, requires_grad=True)
    z = sinter.ones(2, requires_grad=True)
    y = (x * 3).sum()
    with pytest.raises(RuntimeError, match="was not used"):
        sinter.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = sinter.autograd.grad(y, [x, z], retain_graph=True, allow_unused=True)
    assert gx.tolist() == [3.0, 3.0] and gz is None
    gx, gz = sinter.autograd.grad(y, [x, z], retain_graph=True, materialize_grads=True)
    assert gz.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        sinter.autograd.grad(y, [sinter.ones(2)])
    with pytest.raises(NotImplementedError, match="create_graph"):
        sinter.autograd.grad(y, [x], create_graph=True)
    sinter.autograd.grad(y, [x])  # frees the graph
    with pytest.raises(RuntimeError, match="second time"):
        sinter.autograd.grad(y, [x])
