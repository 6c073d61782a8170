"""The README's Python example runs as written."""

import pathlib
import re

import pytest


def test_readme_python_example_runs(capsys):
    pytest.importorskip("torch")
    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("## Python\n", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    assert "tensor(" in capsys.readouterr().out
