"""Zero-copy exchange with NumPy and PyTorch through DLPack and NumPy's array interface: the same
memory on both sides, in both directions."""

import pytest

import sinter


def test_numpy_shares_memory(np):
    s = sinter.arange(6, dtype=sinter.float32).reshape(2, 3)
    a = s.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 1] = 42.0
    assert s[0, 1].item() == 42.0
    s[1, 2] = -1.0
    assert a[1, 2] == -1.0
    t = s.t()
    assert np.array_equal(t.numpy(), a.T) and t.numpy().strides == a.T.strides
    assert np.array_equal(np.asarray(s), a)
    with pytest.raises(RuntimeError, match="requires grad"):
        sinter.ones(2, requires_grad=True).numpy()


def test_from_numpy_without_a_copy(np):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, 1:3]
    s = sinter.from_dlpack(a)
    assert s.dtype == sinter.float64 and s.shape == (3, 2) and s.tolist() == a.tolist()
    a[0, 0] = 99.0
    assert s[0, 0].item() == 99.0
    del a
    assert s.sum().item() == pytest.approx(99 + 2 + 5 + 6 + 9 + 10)  # the producer is kept alive
    for dt, want in [(np.int32, sinter.int32), (np.uint8, sinter.uint8), (np.bool_, sinter.bool),
                     (np.float16, sinter.float16), (np.int64, sinter.int64)]:
        assert sinter.from_dlpack(np.zeros(3, dtype=dt)).dtype == want


def test_torch_both_ways(torch):
    t = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    s = sinter.from_dlpack(t)
    t[1, 1] = 55.0
    assert s[1, 1].item() == 55.0
    back = torch.from_dlpack(s)
    back[0, 0] = -7.0
    assert s[0, 0].item() == -7.0 and t[0, 0].item() == -7.0
    u = sinter.randn(3, 5, dtype=sinter.bfloat16)
    tu = torch.from_dlpack(u)
    assert tu.dtype == torch.bfloat16 and tu.float().tolist() == u.float().tolist()
    assert u.__dlpack_device__() == (1, 0)
    w = sinter.randn(4, 6)[:, ::2]
    assert torch.from_dlpack(w).tolist() == w.tolist()
