"""The Python package's tests: `sinter` is imported from the build tree (PYTHONPATH=<build>/python,
which the CTest test PythonPackage sets) or from an installed wheel."""

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def np():
    return pytest.importorskip("numpy")
