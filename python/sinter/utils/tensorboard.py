"""sinter.utils.tensorboard: SummaryWriter, as torch.utils.tensorboard's (event files that
TensorBoard reads, written by the C++ library's writer thread)."""

from .._C.tensorboard import SummaryWriter  # noqa: F401  (re-exported)
