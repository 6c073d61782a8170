"""Datasets and the DataLoader from Python: batches as (input, target) pairs, shuffling fixed by
the seed, the last short batch, Fashion-MNIST read by the C++ reader, the reference models."""

import os

import pytest

import sinter
from sinter.utils.data import DataLoader, TensorDataset


def test_loader_batches_and_shuffles_by_seed():
    x = sinter.arange(10).float().reshape(10, 1)
    y = sinter.arange(10)
    ds = TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3 and ds[-1][1].item() == 9
    with pytest.raises(IndexError):
        ds[10]
    plain = [t.tolist() for _, t in DataLoader(ds, batch_size=4)]
    assert plain == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert len(list(DataLoader(ds, batch_size=4, drop_last=True))) == 2
    first = [t.tolist() for _, t in DataLoader(ds, batch_size=5, shuffle=True, seed=7)]
    again = [t.tolist() for _, t in DataLoader(ds, batch_size=5, shuffle=True, seed=7)]
    assert first == again and sorted(sum(first, [])) == list(range(10))
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=7)
    epochs = [[t.tolist() for _, t in loader] for _ in range(2)]
    assert epochs[0] != epochs[1]  # a new order each epoch
    for xb, yb in DataLoader(ds, batch_size=3):
        assert xb.shape[1:] == (1,) and xb[:, 0].long().tolist() == yb.tolist()


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_and_the_reference_models():
    ds = sinter.datasets.FashionMNIST(train=False)
    x, y = ds[0]
    assert len(ds) == 10000 and x.shape == (1, 28, 28) and y.dtype == sinter.int64
    raw = sinter.datasets.FashionMNIST(train=False, normalize=False)
    assert 0.0 <= raw[0][0].min().item() and raw[0][0].max().item() <= 1.0
    for make, shape in ((sinter.models.mlp, (2, 1, 28, 28)), (sinter.models.cnn, (2, 1, 28, 28)),
                        (lambda: sinter.models.resnet20(1), (2, 1, 32, 32))):
        model = make()
        assert model(sinter.randn(*shape)).shape == (2, 10)
        assert len(list(model.named_parameters())) > 2


class Squares(sinter.utils.data.Dataset):
    """A dataset written in Python: (x, x^2) pairs, and a dict field."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return sinter.tensor([float(i)]), i * i, {"name": f"s{i}", "w": 0.5}


def test_python_dataset_batches_as_torch_collates(torch):
    from torch.utils.data import DataLoader as TorchLoader
    mine = list(DataLoader(Squares(5), batch_size=2))
    assert len(mine) == 3 and len(DataLoader(Squares(5), batch_size=2)) == 3
    x, y, d = mine[0]
    assert x.shape == (2, 1) and x.dtype == sinter.float32
    assert y.tolist() == [0, 1] and y.dtype == sinter.int64
    assert d["name"] == ["s0", "s1"] and d["w"].dtype == sinter.float64

    class TorchSquares(torch.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return torch.tensor([float(i)]), i * i, {"name": f"s{i}", "w": 0.5}

    theirs = list(TorchLoader(TorchSquares(), batch_size=2))
    for (a, b, c), (ta, tb, tc) in zip(mine, theirs):
        assert a.tolist() == ta.tolist() and b.tolist() == tb.tolist()
        assert c["name"] == tc["name"] and c["w"].tolist() == tc["w"].tolist()
        assert str(b.dtype).split(".")[-1] == str(tb.dtype).split(".")[-1]


def test_python_dataset_shuffles_as_the_cpp_loader_and_threads_keep_order():
    x = sinter.arange(10).float().reshape(10, 1)
    y = sinter.arange(10)
    cpp = [t.tolist() for _, t in DataLoader(TensorDataset(x, y), batch_size=3, shuffle=True,
                                             seed=5)]

    class Pairs(sinter.utils.data.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return x[i], y[i]

    loader = DataLoader(Pairs(), batch_size=3, shuffle=True, seed=5)
    assert [t.tolist() for _, t in loader] == cpp  # the same order for the same seed
    assert [t.tolist() for _, t in loader] != cpp  # and a new one the next epoch
    threaded = DataLoader(Pairs(), batch_size=3, num_workers=2)
    assert [t.tolist() for _, t in threaded] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    dropped = DataLoader(Pairs(), batch_size=3, drop_last=True, collate_fn=lambda b: len(b))
    assert list(dropped) == [3, 3, 3]


def test_subsets_splits_concat_and_iterable_datasets():
    data = sinter.utils.data
    ds = Squares(6)
    parts = data.random_split(ds, [4, 2], seed=3)
    seen = sorted(p[i][1] for p in parts for i in range(len(p)))
    assert [len(p) for p in parts] == [4, 2] and seen == [i * i for i in range(6)]
    assert [len(p) for p in data.random_split(ds, [0.5, 0.5])] == [3, 3]
    both = ds + Squares(2)
    assert len(both) == 8 and both[7][1] == 1 and both[-1][1] == 1
    assert isinstance(TensorDataset(sinter.ones(2), sinter.ones(2)), data.Dataset)

    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(), shuffle=True)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(Squares(2), batch_size=0)
