"""Corners of modules, Functions and loaders where a mistake would silently train the wrong thing:
tied and empty parameters, reassigned children, .to() with shared weights and integer buffers, a
Python subclass of a C++ layer, in-place changes to saved tensors, Functions with non-tensor and
unused outputs, and loaders iterated twice."""

import pytest

import sinter
from sinter import nn
from sinter.autograd import Function, gradcheck


def test_parameters_are_told_apart_by_identity():
    m = nn.Module()
    m.a = nn.Parameter(sinter.zeros(0))
    m.b = nn.Parameter()
    w = sinter.ones(2)
    m.c, m.d = nn.Parameter(w), nn.Parameter(w)
    assert [n for n, _ in m.named_parameters()] == ["a", "b", "c", "d"]
    outer = nn.Module()
    outer.x, outer.y = nn.Module(), nn.Module()
    outer.x.w = outer.y.w = nn.Parameter(sinter.ones(3))
    assert [n for n, _ in outer.named_parameters()] == ["x.w"]  # tied: listed once


def test_children_reassigned_and_buffers_re_registered():
    m = nn.Module()
    m.fc = nn.Linear(2, 2)
    m.fc = None
    assert m.fc is None and list(m.named_parameters()) == []
    with pytest.raises(TypeError, match="child module 'fc'"):
        m.fc = 3
    m.register_buffer("nb", sinter.zeros(1), persistent=False)
    assert "nb" not in m.state_dict()
    m.register_buffer("nb", sinter.zeros(1))
    assert "nb" in m.state_dict()
    with pytest.raises(TypeError, match="buffer 'nb'"):
        m.nb = "text"
    with pytest.raises(AttributeError):
        del m.missing
    with pytest.raises(AttributeError):
        nn.Linear(2, 2).weight = nn.Parameter(sinter.ones(2, 2))  # a C++ layer's is its own


def test_to_keeps_ties_grads_and_integer_buffers():
    m = nn.Module()
    m.e, m.d = nn.Module(), nn.Module()
    m.e.w = m.d.w = nn.Parameter(sinter.ones(2))
    m.register_buffer("count", sinter.arange(3))
    (m.e.w * 2).sum().backward()
    m.to(sinter.float64)
    assert m.e.w is m.d.w and m.e.w.dtype == sinter.float64
    assert m.count.dtype == sinter.int64 and m.e.w.grad.dtype == sinter.float64
    assert m.to(dtype=sinter.float32).e.w.dtype == sinter.float32


def test_a_python_subclass_of_a_cpp_layer_runs_its_own_forward():
    class Zeroed(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 0

    assert Zeroed(2, 2)(sinter.ones(1, 2)).tolist() == [[0.0, 0.0]]


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_saved_tensors_changed_in_place_are_an_error():
    b = sinter.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(b)
    with sinter.no_grad():
        b.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_gradcheck_of_built_in_ops_and_numbers():
    x = sinter.randn(3, dtype=sinter.float64, requires_grad=True)
    assert gradcheck(lambda a: a * a, (x,))
    assert gradcheck(lambda a, s: (a * s).exp(), (x, 0.5))
    xt = sinter.randn(3, 2, dtype=sinter.float64).t()
    xt.requires_grad_(True)
    assert gradcheck(lambda a: a.sin(), (xt,))


def test_function_outputs_that_are_not_tensors_or_not_used():
    class Three(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, 5, x * 3

        @staticmethod
        def backward(ctx, ga, none, gb):
            assert none is None
            return ga * 2 + gb * 3

    x = sinter.ones(2, requires_grad=True)
    a, five, b = Three.apply(x)
    assert five == 5
    a.sum().backward()  # b unused: its gradient comes as zeros
    assert x.grad.tolist() == [2.0, 2.0]

    class WithIndex(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1, sinter.arange(2)

        @staticmethod
        def backward(ctx, g, gi):
            return g

    out, idx = WithIndex.apply(x)
    assert out.requires_grad and not idx.requires_grad


def test_a_loader_runs_one_pass_at_a_time():
    ds = sinter.utils.data.TensorDataset(sinter.arange(9).float(), sinter.arange(9))
    loader = sinter.utils.data.DataLoader(ds, batch_size=3)
    with pytest.raises(RuntimeError, match="another pass over this loader"):
        list(zip(loader, loader))
    it = iter(loader)
    assert len(list(it)) == 3
    assert next(it, "done") == "done" and next(it, "done") == "done"
    assert [y.tolist() for _, y in loader][0] == [0, 1, 2]
