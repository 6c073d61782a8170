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
