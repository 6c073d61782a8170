"""sinter.autograd.Function with forward and backward in Python, gradchecked in f64, inside a
graph of built-in ops, and gradcheck itself catching a wrong backward."""

import pytest

import sinter
from sinter.autograd import Function, gradcheck


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ScaledProduct(Function):
    """(a * b * scale, a + b): two tensor inputs, a number, two outputs."""

    @staticmethod
    def forward(ctx, a, scale, b):
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        return a * b * scale, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        ga = g_prod * b * ctx.scale if g_prod is not None else sinter.zeros_like(a)
        gb = g_prod * a * ctx.scale if g_prod is not None else sinter.zeros_like(b)
        if g_sum is not None:
            ga, gb = ga + g_sum, gb + g_sum
        return ga, None, gb


class WrongBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, g):
        return g  # should be 2 x g


def f64(*shape):
    return sinter.randn(*shape, dtype=sinter.float64, requires_grad=True)


def test_functions_gradcheck_in_f64():
    sinter.manual_seed(1)
    x = f64(3, 4)
    assert gradcheck(Exp.apply, (x,))
    a, b = f64(2, 3), f64(2, 3)
    assert gradcheck(lambda p, q: ScaledProduct.apply(p, 1.5, q), (a, b))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(WrongBackward.apply, (f64(3),))


def test_functions_compose_with_built_in_ops():
    x = sinter.tensor([0.5, -1.0, 2.0], dtype=sinter.float64, requires_grad=True)
    y = (Exp.apply(x * 2) + 1).log().sum()
    y.backward()
    want = [2 * v.exp().item() / (1 + v.exp().item()) for v in (x * 2).detach()]
    assert x.grad.tolist() == pytest.approx(want, rel=1e-12)
    out = Exp.apply(x)
    assert out.requires_grad and "ExpBackward" in repr(out)
    with sinter.no_grad():
        assert not Exp.apply(x).requires_grad


def test_backward_with_the_wrong_arity_is_an_error():
    class TwoGrads(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TwoGrads.apply(f64(2)).sum().backward()


def test_an_applied_function_is_freed_with_its_output_without_a_backward():
    import gc
    import weakref
    contexts = []

    class Square(sinter.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            contexts.append(weakref.ref(ctx))
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = sinter.ones(3, requires_grad=True)
    for _ in range(3):
        Square.apply(x).sum()  # a graph built and dropped, as in an evaluation under grad mode
    gc.collect()
    assert all(ref() is None for ref in contexts)
    y, z = Square.apply(x), Square.apply(x.sum())  # a scalar output gets zeros when unused
    (y.sum() + 0 * z).backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
