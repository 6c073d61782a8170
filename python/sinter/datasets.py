"""sinter.datasets: datasets read by the C++ library: FashionMNIST (torchvision.datasets' name)
and TextCorpus (byte-level text: Debian's fortunes by default, or any files and folders)."""

from ._C.data import FashionMNIST, TextCorpus, TextWindows, default_text_corpus  # noqa: F401
