"""sinter.utils: data loading (sinter.utils.data), activation checkpointing
(sinter.utils.checkpoint) and TensorBoard logs (sinter.utils.tensorboard)."""

from . import checkpoint, data, tensorboard  # noqa: F401
