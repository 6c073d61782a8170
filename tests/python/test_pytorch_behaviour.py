"""Corners where a Python user expects PyTorch's behaviour: None in indexing and comparisons,
in-place operators, masks, exception types, overflow, decorators, NumPy's copies."""

import operator

import pytest

import sinter


def test_none_in_indexing_and_comparisons():
    x = sinter.arange(3)
    assert x[None].shape == (1, 3)
    x[None] = 5
    assert x.tolist() == [5, 5, 5]
    assert (x == None) is False and (x != None) is True  # noqa: E711
    assert x not in [None] and sinter.float32 != None and sinter.device("cpu") != None  # noqa: E711
    assert sinter.float32 != "float32"


def test_in_place_operators_change_the_tensor():
    params = [sinter.ones(3, requires_grad=True)]
    (params[0] * 2).sum().backward()
    with sinter.no_grad():
        for q in params:
            q -= 0.25 * q.grad
    assert params[0].tolist() == [0.5, 0.5, 0.5]
    a = sinter.tensor([1, 2])
    b = a
    a += 3
    a *= 2
    a //= 3
    assert b is a and a.tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="result type f32 can't be cast to the desired output"):
        a /= 2
    assert sinter.zeros(3).add_(2, alpha=3).tolist() == [6.0, 6.0, 6.0]


def test_masks_combine():
    m, n = sinter.tensor([True, False, True]), sinter.tensor([True, True, False])
    assert (~m).tolist() == [False, True, False]
    assert (m & n).tolist() == [True, False, False] and (m | n).tolist() == [True, True, True]
    assert (m ^ n).tolist() == [False, True, True] and (m & True).tolist() == m.tolist()
    # Integers combine bit by bit, as torch's; floating tensors are refused.
    assert (sinter.arange(3) & sinter.arange(1, 4)).tolist() == [0, 0, 2]
    with pytest.raises(RuntimeError, match="bitwise_and: not implemented for f32"):
        sinter.arange(3.0) & sinter.arange(3.0)


def test_exception_types_as_pytorch():
    t = sinter.arange(6).reshape(2, 3)
    with pytest.raises(IndexError, match="only integers, slices"):
        t[1.5]
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(sinter.tensor(1))
    with pytest.raises(TypeError):
        operator.index(sinter.tensor(1.5))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[:, ::-1]
    with pytest.raises(BufferError):
        sinter.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(RuntimeError, match="negative integer powers"):
        sinter.tensor([2, 3]) ** -1
    assert (sinter.tensor([2.0]) ** -1).tolist() == [0.5]
    u = sinter.zeros(2, dtype=sinter.uint8)
    with pytest.raises(RuntimeError, match="without overflow"):
        u[0] = 300
    with pytest.raises(RuntimeError, match="without overflow"):
        sinter.zeros(1, dtype=sinter.int32).fill_(2**40)
    x = sinter.ones(2, requires_grad=True)
    x.register_hook(lambda g: "not a tensor")
    with pytest.raises(TypeError, match="a hook must return None or a Tensor"):
        (x * 2).sum().backward()


def test_clamp_keeps_integer_tensors_integer():
    c = sinter.tensor([1, 7]).clamp(0, 5)
    assert c.dtype == sinter.int64 and c.tolist() == [1, 5]
    assert sinter.tensor([1, 7]).clamp(max=2.5).dtype == sinter.float32


def test_grad_mode_decorators():
    @sinter.set_grad_enabled(False)
    def f(v):
        return v * 2

    assert sinter.is_grad_enabled()  # defining it changed nothing
    x = sinter.ones(1, requires_grad=True)
    assert not f(x).requires_grad and sinter.is_grad_enabled()

    @sinter.no_grad
    def g(v):
        return v * 2

    @sinter.inference_mode
    def h(v):
        return v * 2

    assert not g(x).requires_grad and h(x).is_inference()


def test_tensor_data_corners(np):
    with pytest.raises(ValueError, match="expected a sequence at dim 1"):
        sinter.tensor([[1], 2])
    with pytest.raises(ValueError, match="ragged"):
        sinter.tensor([1, [2]])
    with pytest.raises(ValueError):
        sinter.tensor([1, [2, 3]])
    assert sinter.tensor([np.float32(1.5), 2]).tolist() == [1.5, 2.0]
    assert sinter.tensor(np.int64(3)).item() == 3
    ro = np.broadcast_to(np.arange(3.0), (2, 3))
    assert sinter.tensor(ro).tolist() == [[0.0, 1.0, 2.0]] * 2


def test_numpy_copies_when_asked(np):
    t = sinter.zeros(3)
    a = np.array(t)
    a[0] = 5.0
    assert t[0].item() == 0.0
    b = np.asarray(t)
    b[1] = 7.0
    assert t[1].item() == 7.0
    c = np.from_dlpack(t, copy=True)
    c[2] = 1.0
    assert t[2].item() == 0.0
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(sinter.ones(2, requires_grad=True))


def test_named_results_and_keyword_conversions():
    x = sinter.tensor([[1.0, 5.0], [7.0, 2.0]])
    m = x.max(dim=1)
    assert m.values.tolist() == [5.0, 7.0] and m.indices.tolist() == [1, 0]
    values, indices = x.min(0)
    assert values.tolist() == [1.0, 2.0] and indices.tolist() == [0, 1]
    assert x.max().item() == 7.0
    assert x.to(dtype=sinter.float64).dtype == sinter.float64
    assert x.to(device="cpu", dtype=sinter.int64).tolist() == [[1, 5], [7, 2]]


def test_bad_sizes_name_the_call_the_argument_and_the_element():
    with pytest.raises(TypeError, match=r"reshape\(\): argument 'shape' must be tuple of ints, "
                                        "not str"):
        sinter.ones(2).reshape("x")
    with pytest.raises(TypeError, match=r"zeros\(\): argument 'size' must be tuple of ints, but "
                                        "found element of type float at pos 1"):
        sinter.zeros(2, 2.5)
    with pytest.raises(TypeError, match="element of type NoneType at pos 1"):
        sinter.ones(4).view((2, None))
    assert sinter.ones(4).reshape(sinter.tensor(2), 2).shape == (2, 2)  # __index__ counts
