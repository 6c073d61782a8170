"""sinter.models: the reference models of the C++ examples (mlp, cnn, resnet20) and the language
models (GPT, Llama, with generate and a KV cache), as C++ modules that Python code trains, wraps
and saves like any other."""

from ._C.models import GPT, KVCache, Llama, cnn, mlp, resnet20  # noqa: F401  (re-exported)
