"""The package as an editor and pip see it: type stubs and the py.typed marker beside the
extension module, docstrings on the calls, the version."""

import pathlib

import sinter


def test_stubs_and_docstrings_ship_with_the_module():
    stub = pathlib.Path(sinter._C.__file__).with_name("_C.pyi")
    assert stub.is_file() and stub.with_name("py.typed").is_file()
    text = stub.read_text()
    for name in ("class Tensor:", "def zeros(", "def from_dlpack(", "class dtype:"):
        assert name in text, name
    assert "without a copy" in sinter.from_dlpack.__doc__
    assert sinter.__version__ == "0.1.0"


def test_torch_imports_after_sinter():
    # sinter opens NCCL only when used (Note [nccl loading]): importing it first must not give
    # torch's CUDA library an older NCCL than its own.
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is None:
        import pytest
        pytest.skip("torch is not installed")
    code = "import sinter, torch; print(torch.ones(2).add(1).tolist())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[2.0, 2.0]"
