"""sinter.safetensors: save_file and load_file, as safetensors.torch's (the files are the same
format, read and written by the C++ library)."""

from ._C.safetensors import load_file, save_file  # noqa: F401  (re-exported)
