"""sinter.utils: data loading (sinter.utils.data)."""

from . import data  # noqa: F401
