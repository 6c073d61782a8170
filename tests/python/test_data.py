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
