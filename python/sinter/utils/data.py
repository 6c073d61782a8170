"""sinter.utils.data: TensorDataset and DataLoader with torch.utils.data's names; batches come as
(input, target) pairs, gathered and prefetched in C++."""

from .._C.data import DataLoader, Dataset, TensorDataset, first  # noqa: F401  (re-exported)
