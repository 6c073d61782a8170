"""Several advanced indices in one key, and assignment through advanced indices (Note [advanced
indexing]), each against torch's result for the same key."""

import pytest

import sinter

# Keys as functions of the library (tensors must come from the same library).
KEYS = [
    ("rows and cols", lambda L: (L.tensor([0, 1, 1]), L.tensor([1, 2, 0]))),
    ("broadcast", lambda L: (L.tensor([[0], [1]]), L.tensor([0, 2]))),
    ("lists", lambda L: ([0, 1], [2, 1])),
    ("negative", lambda L: (L.tensor([-1, 0]), slice(None), L.tensor([-2, 1]))),
    ("separated", lambda L: (L.tensor([0, 1]), slice(1, 3), L.tensor([3, 0]))),
    ("adjacent after a slice", lambda L: (slice(None), L.tensor([1, 2]), L.tensor([0, 3]))),
    ("int and tensor", lambda L: (1, L.tensor([0, 2]), L.tensor([3, 1]))),
    ("ellipsis", lambda L: (Ellipsis, L.tensor([0, 2]), L.tensor([1, 3]))),
    ("none", lambda L: (None, L.tensor([1, 0]), slice(None), L.tensor([2, 2]))),
    ("mask and index", lambda L: (L.tensor([True, False]), slice(None), L.tensor([0, 3]))),
    ("partial mask", lambda L: (slice(None), L.tensor([[True, False, True, False],
                                                       [False, True, True, False],
                                                       [True, True, False, False]]))),
    ("one index", lambda L: (L.tensor([1, 0, 1]),)),
    ("0-dim tensors", lambda L: (L.tensor(1), L.tensor(2))),
]


def _data(L):
    return L.arange(24, dtype=L.float64).reshape(2, 3, 4)


@pytest.mark.parametrize("name,key", KEYS, ids=[k[0] for k in KEYS])
def test_read_matches_torch(torch, name, key):
    got = _data(sinter)[key(sinter)]
    want = _data(torch)[key(torch)]
    assert got.shape == tuple(want.shape)
    assert got.flatten().tolist() == want.flatten().tolist()


@pytest.mark.parametrize("name,key", KEYS, ids=[k[0] for k in KEYS])
def test_write_matches_torch(torch, name, key):
    results = []
    for L in (sinter, torch):
        x = _data(L)
        shape = x[key(L)].shape
        n = 1
        for s in shape:
            n *= s
        x[key(L)] = -L.arange(n, dtype=L.float64).reshape(*shape) - 1
        x2 = _data(L)
        x2[key(L)] = 7.5  # a number broadcasts
        results.append((x.flatten().tolist(), x2.flatten().tolist()))
    assert results[0] == results[1]


def test_repeated_positions_take_the_last_value(torch):
    out = []
    for L in (sinter, torch):
        x = L.zeros(5)
        x[L.tensor([1, 3, 1])] = L.tensor([10.0, 20.0, 30.0])
        out.append(x.tolist())
    assert out[0] == [0.0, 30.0, 0.0, 20.0, 0.0] == out[1]


def test_assignment_is_in_place_on_views_and_recorded_by_autograd():
    x = sinter.zeros(3, 4)
    row = x[1]  # a view: it sees the assignment
    x[sinter.tensor([1, 2]), sinter.tensor([0, 3])] = sinter.tensor([4.0, 5.0])
    assert row.tolist() == [4.0, 0.0, 0.0, 0.0] and x[2, 3].item() == 5.0
    w = sinter.ones(3, requires_grad=True)
    y = w * 2
    y[sinter.tensor([0, 1])] = 0.0  # recorded: the assigned elements pass no gradient back
    assert y.tolist() == [0.0, 0.0, 2.0]
    y.sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 2.0]
    with pytest.raises(RuntimeError, match="copy_: a view .* of a leaf tensor that requires"):
        w[sinter.tensor([0, 1])] = 0.0
    with sinter.no_grad():
        w[sinter.tensor([0, 1])] = 0.0
    assert w.tolist() == [0.0, 0.0, 1.0]


def test_errors():
    x = sinter.zeros(2, 3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[sinter.tensor([0, 1]), sinter.tensor([0, 3])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[sinter.tensor([0]), sinter.tensor([-4])] = 1.0
    with pytest.raises(RuntimeError, match="could not be broadcast"):
        x[sinter.tensor([0, 1]), sinter.tensor([0, 1, 2])]
    with pytest.raises(RuntimeError, match="long, int, byte or bool"):
        x[sinter.tensor([0.0]), sinter.tensor([0])]
    leaf = sinter.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf[sinter.tensor([0])] = 1.0  # in place on a leaf that requires grad, as torch refuses


def test_assignment_is_exact_for_every_dtype_and_value(torch):
    # Values are selected, not computed from the old ones: inf, huge values, ints and bools.
    cases = [
        (lambda L: L.tensor([float("inf"), 2.0]), lambda L: [0], lambda L: 1.0),
        (lambda L: L.tensor([1e8, 2.0]), lambda L: [0, 1], lambda L: L.tensor([1.0, 3.0])),
        (lambda L: L.tensor([float("nan"), 2.0]), lambda L: [0], lambda L: 5.0),
        (lambda L: L.arange(4), lambda L: [0, 2], lambda L: 9),
        (lambda L: L.zeros(3, dtype=L.bool), lambda L: [1], lambda L: True),
        (lambda L: L.zeros(4), lambda L: L.tensor([True, False, True, False]),
         lambda L: L.tensor([1.0, 2.0])),
    ]
    for make, key, value in cases:
        out = []
        for L in (sinter, torch):
            t = make(L)
            t[key(L)] = value(L)
            out.append(t.tolist())
        assert out[0] == out[1]


def test_a_0_dim_integer_tensor_indexes_as_an_integer(torch):
    got = sinter.arange(120).reshape(2, 3, 4, 5)[sinter.tensor(1), :, [0, 2]]
    want = torch.arange(120).reshape(2, 3, 4, 5)[torch.tensor(1), :, [0, 2]]
    assert got.shape == tuple(want.shape) and got.flatten().tolist() == want.flatten().tolist()
