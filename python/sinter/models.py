"""sinter.models: the reference models of the C++ examples (mlp, cnn, resnet20), as C++ modules
that Python code trains, wraps and saves like any other."""

from ._C.models import cnn, mlp, resnet20  # noqa: F401  (re-exported)
