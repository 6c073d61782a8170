"""sinter.datasets: datasets read by the C++ library (torchvision.datasets' names)."""

from ._C.data import FashionMNIST  # noqa: F401  (re-exported)
