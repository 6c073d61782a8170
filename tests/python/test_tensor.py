"""sinter.Tensor from Python: factories, dtypes and devices, operators with PyTorch's scalar
promotion, indexing, views, conversions, printing and errors, each against PyTorch's answer where
torch is installed (written out otherwise)."""

import math

import pytest

import sinter


def test_factories_and_properties():
    z = sinter.zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == sinter.float32 and z.device == sinter.device("cpu")
    assert sinter.ones((4,), dtype=sinter.int64).tolist() == [1, 1, 1, 1]
    assert sinter.full((2,), 7).dtype == sinter.int64
    assert sinter.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert sinter.arange(5).dtype == sinter.int64
    assert sinter.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert sinter.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert sinter.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    r = sinter.randint(0, 10, (100,))
    assert r.dtype == sinter.int64 and 0 <= r.min().item() and r.max().item() < 10
    assert z.ndim == 2 and z.numel() == 6 and z.size(1) == 3 and z.size() == (2, 3)
    assert z.is_contiguous() and z.t().stride() == (1, 3)
    assert repr(sinter.float32) == "sinter.float32" and sinter.float == sinter.float32
    assert sinter.long == sinter.int64 and sinter.float64 != sinter.float32
    assert sinter.device("cuda:1").index == 1 and sinter.device("cpu").index is None
    assert repr(sinter.device("cuda", 0)) == "device(type='cuda', index=0)"


def test_seeded_draws_repeat():
    sinter.manual_seed(3)
    a = sinter.randn(5)
    sinter.manual_seed(3)
    assert sinter.randn(5).tolist() == a.tolist()


def test_tensor_from_data_infers_as_pytorch():
    assert sinter.tensor([1, 2, 3]).dtype == sinter.int64
    assert sinter.tensor([1, 2.5]).dtype == sinter.float32
    assert sinter.tensor([True, False]).dtype == sinter.bool
    t64 = sinter.tensor([[1, 2], [3, 4]], dtype=sinter.float64)
    assert t64.dtype == sinter.float64 and t64.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert sinter.tensor(3.5).shape == () and sinter.tensor(3.5).item() == 3.5
    assert sinter.tensor([]).shape == (0,)
    with pytest.raises(ValueError, match="expected sequence of length 2"):
        sinter.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="Could not infer dtype of str"):
        sinter.tensor(["a"])


def test_operators_and_scalar_promotion(torch):
    cases = [([1, 2, 3], None), ([1.5, -2.0, 4.0], None), ([1, 0, 1], "bool")]
    scalars = [2, 2.5, True]
    for data, kind in cases:
        s_t = sinter.tensor([bool(v) for v in data]) if kind else sinter.tensor(data)
        t_t = torch.tensor([bool(v) for v in data]) if kind else torch.tensor(data)
        for s in scalars:
            for op in ["__add__", "__radd__", "__mul__", "__rmul__", "__truediv__", "__sub__",
                       "__rsub__", "__lt__", "__eq__"]:
                if (kind or s is True) and op in ("__sub__", "__rsub__"):
                    continue  # PyTorch refuses subtraction with a bool (checked below)
                got = getattr(s_t, op)(s)
                want = getattr(t_t, op)(s)
                assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1], (data, s, op)
                assert got.tolist() == pytest.approx(want.tolist()), (data, s, op)
    a = sinter.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (a @ a).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert (-a).tolist() == [[-1.0, -2.0], [-3.0, -4.0]]
    assert (2 ** sinter.tensor([1, 2])).tolist() == [2, 4]
    assert (sinter.tensor([7, -7]) // 2).tolist() == [3, -4]
    assert (sinter.tensor([7, -7]) % 3).tolist() == [1, 2]
    assert (a > 2).dtype == sinter.bool
    assert abs(sinter.tensor([-1.5])).tolist() == [1.5]


def test_indexing_as_pytorch(torch):
    base = [[[float(i * 12 + j * 4 + k) for k in range(4)] for j in range(3)] for i in range(2)]
    s, t = sinter.tensor(base), torch.tensor(base)
    keys = [0, -1, (1, 2), slice(None), slice(1, None), (slice(None), 1), (..., 2),
            (None, 0), (0, None, slice(1, 3)), (slice(None), slice(None, None, 2)),
            (1, ..., slice(0, 4, 3)), (slice(-2, None), -1, -1)]
    for key in keys:
        assert s[key].tolist() == t[key].tolist(), key
        assert s[key].shape == tuple(t[key].shape), key
    # Advanced: integer lists and tensors (negative too), and bool masks.
    for key in [[1, 0], (slice(None), [2, 0, -1]), (0, [[0, 1], [2, 2]])]:
        tk = key if not isinstance(key, tuple) else key
        assert s[key].tolist() == t[tk].tolist(), key
    assert s[sinter.tensor([1, 0])].tolist() == t[torch.tensor([1, 0])].tolist()
    mask = [[True, False, True], [False, False, True]]
    assert s[sinter.tensor(mask)].tolist() == t[torch.tensor(mask)].tolist()
    flat = sinter.arange(6)
    assert flat[flat > 2].tolist() == [3, 4, 5]
    # A basic index is a view: writes reach the base.
    v = s[1]
    v[0, 0] = 100.0
    assert s[1, 0, 0].item() == 100.0
    s[0, :, 1] = sinter.tensor([-1.0, -2.0, -3.0])
    assert s[0, :, 1].tolist() == [-1.0, -2.0, -3.0]
    x = sinter.arange(5)
    x[x > 2] = 0
    assert x.tolist() == [0, 1, 2, 0, 0]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 2"):
        s[3]
    with pytest.raises(IndexError, match="too many indices"):
        s[0, 0, 0, 0]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        s[::-1]


def test_views_and_conversions(torch):
    a = sinter.arange(6).reshape(2, 3)
    assert a.view(3, 2).tolist() == [[0, 1], [2, 3], [4, 5]]
    assert a.permute(1, 0).tolist() == a.t().tolist() == a.T.tolist()
    assert a.unsqueeze(0).shape == (1, 2, 3) and a.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert a.flatten().tolist() == list(range(6))
    assert a.expand(2, 2, 3).shape == (2, 2, 3)
    assert a.float().dtype == sinter.float32 and a.to(sinter.float64).dtype == sinter.float64
    assert a.to("cpu").device.type == "cpu"
    assert a.sum().item() == 15 and a.sum(dim=1).tolist() == [3, 12]
    f = a.float()
    assert f.mean(dim=0).tolist() == [1.5, 2.5, 3.5]
    values, indices = f.max(dim=1)
    assert values.tolist() == [2.0, 5.0] and indices.tolist() == [2, 2]
    assert f.softmax(dim=1).sum(dim=1).tolist() == pytest.approx([1.0, 1.0])
    assert f.clamp(min=1, max=4).tolist() == [[1.0, 1.0, 2.0], [3.0, 4.0, 4.0]]
    assert float(sinter.tensor([2.5])) == 2.5 and int(sinter.tensor(3)) == 3
    assert bool(sinter.tensor([True]))
    assert [x.item() for x in sinter.tensor([4, 5])] == [4, 5] and len(a) == 2
    assert f.prod(dim=1).tolist() == [0.0, 60.0] and f.cumprod(1)[1].tolist() == [3.0, 12.0, 60.0]
    e = sinter.tensor([0.0, 0.5]).erfinv().tolist()
    assert e == pytest.approx(torch.erfinv(torch.tensor([0.0, 0.5])).tolist())


def test_printing_as_pytorch(torch):
    cases = [
        [1.0, 2.0, 3.0], [1.5, -2.25, 3.125], [0.1, 100000.0], [1e-5, 1.0], [1e10, 1.0],
        [[1, 2], [3, 40]], [True, False], [float("nan"), 1.0, float("inf")], [],
        [[0.5] * 30] * 2, list(range(2000)), [[0.0, 0.0]], [3.0],
    ]
    for data in cases:
        s, t = sinter.tensor(data), torch.tensor(data)
        assert repr(s) == repr(t).replace("torch.", "sinter."), data
    for dtype in ["float64", "int32", "bfloat16"]:
        s = sinter.tensor([1.5, 2.0]).to(getattr(sinter, dtype))
        t = torch.tensor([1.5, 2.0]).to(getattr(torch, dtype))
        assert repr(s) == repr(t).replace("torch.", "sinter."), dtype
    assert repr(sinter.zeros(2, 0)) == "tensor([], size=(2, 0))"
    assert repr(sinter.tensor(2.5)) == "tensor(2.5000)"
    assert repr(sinter.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"


def test_errors_are_python_exceptions():
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        sinter.ones(2) + sinter.ones(3)
    with pytest.raises(RuntimeError, match="Device::parse"):
        sinter.zeros(2, device="tpu")
    with pytest.raises(TypeError):
        sinter.ones(2) + "a"
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted"):
        sinter.ones(2).item()
    assert not math.isnan(sinter.ones(1).item())
