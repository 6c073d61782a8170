"""What the Hugging Face checks share: torch and transformers imported (or the test skipped with
77), a fresh work folder, and the ok/FAIL lines with the status they end with."""
import os
import shutil
import sys

try:
    import numpy as np  # noqa: F401 (re-exported)
    import torch
    import transformers
    from safetensors.numpy import load_file  # noqa: F401 (re-exported)
except ImportError as e:
    print(f"skipped: {e} (pip install torch transformers safetensors)")
    sys.exit(77)

transformers.logging.set_verbosity_error()
torch.manual_seed(0)
torch.set_num_threads(2)
failures = []


def fresh_folder(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def finish():
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all passed")
