"""lgamma, digamma and mvlgamma against torch in f64 and f32 (values across the reflected range,
near the poles and far out; gradients), their poles, and mvlgamma's checks."""

import pytest

import sinter
from torch_parity import assert_error_as_torch, assert_same

POINTS = [-9.75, -3.2, -1.5, -0.999, -1e-3, 1e-5, 0.3, 0.5, 1.0, 1.7, 2.0, 3.5, 9.5, 10.0,
          11.2, 54.0, 1e3, 1e7]


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
@pytest.mark.parametrize("dtype, rel", [("float64", 1e-12), ("float32", 3e-6)])
def test_values_and_gradients_as_torch(torch, name, dtype, rel):
    results = []
    for lib in (sinter, torch):
        x = lib.tensor(POINTS, dtype=getattr(lib, dtype), requires_grad=True)
        y = getattr(lib, name)(x)
        y.sum().backward()
        results.append([t.tolist() for t in (y, x.grad, getattr(x.detach(), name)())])
    for got, want, what in zip(*results, ("values", "gradient", "method")):
        # torch's trigamma (digamma's gradient) is good to about 1e-9; Sinter's to the last bits.
        close = max(rel, 1e-8) if (name, what) == ("digamma", "gradient") else rel
        assert got == pytest.approx(want, rel=close, abs=close), f"{name} {what}"


def test_poles_and_in_place_as_torch(torch):
    out = []
    for lib in (sinter, torch):
        x = lib.tensor([0.0, -0.0, -1.0, -4.0, float("inf"), float("-inf"), float("nan")],
                       dtype=lib.float64)
        y = x.clone()
        y.lgamma_()
        out.append((x.lgamma().tolist(), x.digamma().tolist(), y.tolist(),
                    lib.lgamma(lib.tensor([2, 5])).dtype == lib.float32))
    assert str(out[0]) == str(out[1])  # inf, -inf and nan as torch's


def test_mvlgamma_as_torch(torch):
    results = []
    for lib in (sinter, torch):
        x = lib.tensor([[2.5, 3.0], [7.25, 40.0]], dtype=lib.float64, requires_grad=True)
        y = lib.mvlgamma(x, 4)
        y.sum().backward()
        results.append((y, x.grad, x.detach().mvlgamma(1)))
    for got, want in zip(*results):
        assert_same(got, want, "mvlgamma", 1e-12)
    assert_error_as_torch(torch, lambda L: L.mvlgamma(L.tensor([3.0]), 0), RuntimeError,
                          "p has to be greater than or equal to 1")


def test_exact_zeros_poles_neighbourhood_and_tiny_arguments(torch):
    # 40-digit values (mpmath): next to the poles -1 and -3, below f64's normal range, near 1.
    points = [-1.0000000000000002, -1.0000001, -2.9999999, 1e-310, -1e-300, 1.0 + 1e-8]
    want = [36.04365338911715, 16.11809560809603, 14.326336308978625, 713.8013788281542,
            690.7755278982137, -5.772156531688512e-09]
    got = sinter.lgamma(sinter.tensor(points, dtype=sinter.float64)).tolist()
    assert got == pytest.approx(want, rel=1e-14)
    assert sinter.lgamma(sinter.tensor([1.0, 2.0])).tolist() == [0.0, 0.0]  # log 0! and log 1!
    x = sinter.tensor(points[:3], dtype=sinter.float64, requires_grad=True)
    x.digamma().sum().backward()
    assert x.grad.tolist() == pytest.approx([2.028240960365167e+31, 99999999883229.2,
                                             100000000327318.78], rel=1e-6)
