"""In-place ops under autograd (Note [in-place autograd] in include/sinter/autograd.h): the patterns
torch users write in a forward (x += residual, out[:, t] = h, masked assignment, in-place
activations, writes through views), compared with torch on f64 values and gradients, and the
writes torch refuses, refused."""

import pytest

import sinter
from torch_parity import assert_same, rand


def _residual(lib, x, w):
    y = x @ w
    y += x  # a residual added in place, as torchvision's BasicBlock does
    return y.relu().sum(1)


def _scaled_in_place(lib, x, w):
    y = x * 2
    y *= w  # mul's backward needs y's old values
    y /= 3
    y -= w
    return y * y


def _activation_in_place(lib, x, w):
    y = x * w
    y.sigmoid_()  # torch's backward reads y itself: nothing may change it after
    z = x - w
    z.abs_()
    return y * 2 + z.sqrt_()


def _row_assignment(lib, x, w):
    y = x * 3
    y[1] = w[0] * 2
    y[2, 1:3] = w[1, :2]
    return y * y


def _unrolled_recurrence(lib, x, w):
    out = lib.zeros(4, 4, dtype=lib.float64)
    h = w[:, 0]
    for t in range(4):
        h = (x[:, t] * h + w[:, t]).tanh()
        out[:, t] = h
    return out.cumsum(1)


def _view_made_before(lib, x, w):
    y = x * 1
    head = y[0:2]
    y[1:3] += w[1:3]
    return head * head + y[0:2]


def _through_transpose(lib, x, w):
    y = x * 1
    v = y.t()[1:3]
    v.mul_(2)
    v[0, 0:2] = w[0, 0:2]
    return y * y + (v ** 3).sum()


def _masked_assignment(lib, x, w):
    y = x * 1
    y[w > 0] = 0.5
    y[x < 0] = w[x < 0]
    return y * y


def _advanced_assignment(lib, x, w):
    y = x * 1
    y[[0, 2]] = w[[1, 2]] * 3
    y[lib.tensor([1, 1]), lib.tensor([0, 3])] = w[3, 1:3]
    return y * y * y


def _fills(lib, x, w):
    y = x * 1
    y[0].zero_()
    y[1].fill_(2.0)
    y.clamp_(min=-0.5, max=0.5)
    y.masked_fill_(w > 1, 0.0)
    return y.exp_() * w


def _into_buffer(lib, x, w):
    y = lib.zeros(4, 4, dtype=lib.float64)
    y.copy_(x)
    y.add_(w, alpha=2)
    y.addcmul_(w, x, value=0.5)
    y.lerp_(w, 0.3)
    return y * y


def _expanded_view_made_before(lib, x, w):
    y = x * 2
    e = y.unsqueeze(0).expand(3, 4, 4)
    y.mul_(w)
    return e * e


CASES = [_residual, _scaled_in_place, _activation_in_place, _row_assignment,
         _unrolled_recurrence, _view_made_before, _through_transpose, _masked_assignment,
         _advanced_assignment, _fills, _into_buffer, _expanded_view_made_before]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__.strip("_") for f in CASES])
def test_in_place_forward_gives_torchs_values_and_gradients(torch, fn):
    results = []
    for lib in (sinter, torch):
        x = rand(lib, (4, 4), 1).requires_grad_(True)
        w = rand(lib, (4, 4), 2).requires_grad_(True)
        out = fn(lib, x, w)
        out.backward(rand(lib, tuple(out.shape), 3))
        results.append((out, x.grad, w.grad))
    for got, want, what in zip(results[0], results[1], ("output", "x.grad", "w.grad")):
        if want is None:
            assert got is None or not got.abs().sum().item(), what
        else:
            assert_same(got, want, f"{fn.__name__} {what}")


def test_write_into_a_buffer_makes_it_part_of_the_graph():
    w = sinter.ones(3, requires_grad=True)
    buf = sinter.zeros(2, 3)
    assert not buf.requires_grad
    buf[1] = w * 2
    assert buf.requires_grad and not buf.is_leaf
    (buf * buf).sum().backward()
    assert w.grad.tolist() == [8.0, 8.0, 8.0]
    with sinter.no_grad():
        buf2 = sinter.zeros(3)
        buf2 += w
    assert not buf2.requires_grad


@pytest.mark.parametrize("write", [
    lambda x: x.add_(1), lambda x: x.__iadd__(1), lambda x: x[0].mul_(2),
    lambda x: x.__setitem__(0, 1.0), lambda x: x.t().copy_(x.detach()),
    lambda x: x.uniform_(), lambda x: x.relu_()])
def test_a_leaf_that_requires_grad_is_refused_as_in_torch(torch, write):
    for lib in (torch, sinter):
        x = lib.ones(2, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            write(x)
        assert x.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_a_saved_tensor_overwritten_is_an_error_at_backward_as_in_torch(torch):
    for lib in (torch, sinter):
        x = lib.ones(3, requires_grad=True)
        y = x.sigmoid()  # saves its output
        y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace|modified by an in-place"):
            y.sum().backward()


def test_what_is_written_into_an_integer_tensor_carries_no_gradient(torch):
    results = []
    for lib in (sinter, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        buf = lib.zeros(2, dtype=lib.int64)
        buf.copy_(x * 3)
        assert not buf.requires_grad
        (buf.float() * x).sum().backward()
        results.append(x.grad)
    assert_same(*results)


def test_views_of_a_leaf_made_from_a_view_are_refused_as_in_torch(torch):
    for lib in (torch, sinter):
        p = lib.ones(6)[1:4].requires_grad_()
        with pytest.raises(RuntimeError, match="leaf"):
            p[0:2].mul_(lib.tensor([3.0, 4.0], requires_grad=True))


def test_a_view_made_under_no_grad_is_not_written_with_grad_on_as_in_torch(torch):
    for lib in (torch, sinter):
        y = lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 2
        with lib.no_grad():
            v = y[0:2]
        with pytest.raises(RuntimeError, match="no_grad|grad mode off"):
            v.mul_(3)


def test_a_view_of_a_rebased_base_is_a_result_with_hooks_and_retained_grad(torch):
    results = []
    for lib in (sinter, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        buf = lib.zeros(4)
        v = buf[1:3]
        buf[2:].copy_(w * 5)
        seen = []
        assert not v.is_leaf and v.requires_grad
        v.register_hook(lambda g: seen.append(g.tolist()))
        y = w * 2
        y.retain_grad()
        y.mul_(3)  # the retained gradient is the new y's
        ((v * v).sum() + (y * y).sum()).backward()
        results.append((seen, y.grad.tolist(), w.grad.tolist()))
    assert results[0] == results[1]


def test_retains_grad_output_nr_and_post_accumulate_hooks_as_torch(torch):
    results = []
    for lib in (sinter, torch):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.retain_grad()
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
        (y * y).sum().backward()
        results.append((y.retains_grad, x.retains_grad, y.output_nr, seen, y.grad.tolist()))
    assert results[0] == results[1]
