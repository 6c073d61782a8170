"""sinter.utils: data loading (sinter.utils.data) and TensorBoard logs
(sinter.utils.tensorboard)."""

from . import data, tensorboard  # noqa: F401
