"""sinter.utils.data: datasets and the DataLoader, with torch.utils.data's names.

A dataset of the C++ library (TensorDataset, FashionMNIST) is batched by the C++
loader: gathered and prefetched in C++, batches as (input, target) pairs. A dataset written in
Python (a Dataset subclass with __getitem__ and __len__, an IterableDataset, or any object with
__getitem__ and __len__) is batched here: samples drawn in the sampler's order, collated as torch's
default_collate does (tensors stacked, numbers made tensors, tuples, lists and dicts collated
field by field). With shuffle=True both draw the same order for the same seed and epoch.
num_workers > 0 fetches samples on that many threads (not processes): it helps a __getitem__ that
waits (reading files) or runs Sinter's ops, not one that computes in Python."""

import abc
import collections.abc
import itertools
from concurrent.futures import ThreadPoolExecutor

from .. import _C as _root
from .._C.data import FashionMNIST  # noqa: F401  (re-exported)
from .._C.data import TensorDataset, first  # noqa: F401  (re-exported)
from .._C.data import DataLoader as _CppLoader
from .._C.data import Dataset as _CppDataset
from .._C.data import _shuffled_order
from .._tensor_data import tensor as _tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split", "default_collate", "DataLoader", "Sampler", "SequentialSampler",
           "RandomSampler", "BatchSampler", "DistributedSampler", "first"]


class Dataset(abc.ABC):
    """A map-style dataset: subclasses define __getitem__(index) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


Dataset.register(_CppDataset)


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define __iter__(). Not shuffled, not indexed."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, i):
        if isinstance(i, list):
            return [self.dataset[self.indices[j]] for j in i]
        return self.dataset[self.indices[i]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, i):
        if i < 0:
            if -i > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            i += len(self)
        for k, end in enumerate(self.cumulative_sizes):
            if i < end:
                return self.datasets[k][i - (end - len(self.datasets[k]))]
        raise IndexError(f"index {i} is out of range for a dataset of {len(self)} samples")


def random_split(dataset, lengths, seed=0):
    """Subsets of the given lengths (or fractions summing to 1, the remainder spread one by one
    over the first parts, as torch's) of a random permutation of `dataset`, fixed by `seed`."""
    n = len(dataset)
    lengths = list(lengths)
    if all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) != n:
        counts = [int(f * n) for f in lengths]
        for k in range(n - sum(counts)):
            counts[k % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _shuffled_order(n, seed, 0)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out


class Sampler:
    """The order of indices of an epoch: subclasses define __iter__ (and __len__)."""

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new permutation each epoch, the C++ DataLoader's for the same seed and epoch."""

    def __init__(self, data_source, seed=0):
        self.data_source = data_source
        self.seed = seed
        self.epoch = 0

    def __iter__(self):
        order = _shuffled_order(len(self.data_source), self.seed, self.epoch)
        self.epoch += 1
        return iter(order)

    def __len__(self):
        return len(self.data_source)


class BatchSampler(Sampler):
    """Lists of batch_size indices from `sampler`; the last short one unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """Rank `rank`'s share of the indices of `dataset` (the C++ DistributedSampler: a permutation
    fixed by seed and epoch, padded to a multiple of the ranks): give it to a DataLoader as its
    sampler and call set_epoch(epoch) before each epoch. num_replicas and rank default to the
    process group's (sinter.distributed)."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        from .. import distributed
        num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
        rank = distributed.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self._impl = _root.distributed._DistributedSampler(len(dataset), num_replicas, rank,
                                                           shuffle, seed, drop_last)

    def set_epoch(self, epoch):
        self._impl.set_epoch(epoch)

    def __iter__(self):
        return iter(self._impl.indices())

    def __len__(self):
        return self._impl.num_samples()


def default_collate(batch):
    """Samples to a batch as torch's default_collate: tensors stacked along a new dim 0, Python
    floats to f64, ints to i64 and bools to bool tensors, NumPy arrays to stacked tensors, strings
    kept as a list, and tuples, lists, named tuples and dicts collated field by field."""
    elem = batch[0]
    if isinstance(elem, _root.Tensor):
        return _root.stack(list(batch))
    if type(elem).__module__ == "numpy" and hasattr(elem, "dtype"):
        return default_collate([_root.from_dlpack(e.copy() if e.ndim else e.reshape(()).copy())
                                for e in batch]) if elem.dtype.kind in "biuf" else list(batch)
    if isinstance(elem, bool):
        return _tensor(list(batch), dtype=_root.bool)
    if isinstance(elem, int):
        return _tensor(list(batch), dtype=_root.int64)
    if isinstance(elem, float):
        return _tensor(list(batch), dtype=_root.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


def _on_device(batch, device):
    if isinstance(batch, _root.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _on_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_on_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_on_device(v, device) for v in batch)
    return batch


class DataLoader:
    """Batches of a dataset, as torch.utils.data.DataLoader. `seed` fixes the shuffled orders
    (a new one each epoch); `device` puts each batch there. A C++ dataset with no sampler or
    collate_fn of its own goes to the C++ loader (see the module's documentation)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, seed=0,
                 device=None, prefetch_factor=2):
        del pin_memory  # the C++ loader stages its own copies; accepted for torch's callers
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.num_workers, self.device = num_workers, device
        self.collate_fn = collate_fn or default_collate
        self.prefetch = max(1, num_workers * prefetch_factor)
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative")
        if (sampler is not None or batch_sampler is not None) and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self._cpp = None
        if (isinstance(dataset, _CppDataset) and sampler is None and batch_sampler is None
                and collate_fn is None and batch_size is not None):
            self._cpp = _CppLoader(dataset, batch_size, shuffle, seed, drop_last, device)
            return
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("an IterableDataset takes no shuffle, sampler or batch_sampler")
            return
        if sampler is None:
            sampler = RandomSampler(dataset, seed) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        self.batch_sampler = batch_sampler if batch_sampler is not None else (
            BatchSampler(sampler, batch_size, drop_last) if batch_size is not None else None)

    def __len__(self):
        if self._cpp is not None:
            return len(self._cpp)
        if self._iterable:
            n = len(self.dataset)
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)

    def __iter__(self):
        if self._cpp is not None:
            return iter(self._cpp)
        if self._iterable:
            return self._iter_stream()
        return self._iter_map()

    def _finish(self, samples):
        batch = self.collate_fn(samples) if self.batch_sampler is not None else samples
        return _on_device(batch, self.device) if self.device is not None else batch

    def _iter_map(self):
        groups = iter(self.batch_sampler) if self.batch_sampler is not None else (
            i for i in self.sampler)
        fetch = (lambda g: [self.dataset[i] for i in g]) if self.batch_sampler is not None else (
            lambda i: self.dataset[i])
        if self.num_workers == 0:
            for g in groups:
                yield self._finish(fetch(g))
            return
        # Threads fetch up to `prefetch` batches ahead, delivered in order.
        with ThreadPoolExecutor(self.num_workers) as pool:
            pending = collections.deque(pool.submit(fetch, g)
                                        for g in itertools.islice(groups, self.prefetch))
            while pending:
                samples = pending.popleft().result()
                for g in itertools.islice(groups, 1):
                    pending.append(pool.submit(fetch, g))
                yield self._finish(samples)

    def _iter_stream(self):
        it = iter(self.dataset)
        while True:
            if self.batch_size is None:
                samples = list(itertools.islice(it, 1))
                if not samples:
                    return
                batch = samples[0]
            else:
                samples = list(itertools.islice(it, self.batch_size))
                if not samples or (self.drop_last and len(samples) < self.batch_size):
                    return
                batch = self.collate_fn(samples)
            yield _on_device(batch, self.device) if self.device is not None else batch
