"""The Python Fashion-MNIST example (examples/python/fashion_mnist.py) prints what the C++ example
prints for the same seed and options: each epoch's train and test loss and accuracy, and the test
accuracy. Usage: check_python_example.py <fashion_mnist binary> <example .py> <scratch dir>."""

import os
import re
import subprocess
import sys

DATA = "/usr/share/datasets/fashion-mnist"


def figures(out):
    """The epoch lines without their times, and the final accuracy line."""
    lines = [re.sub(r" \| [0-9.]+s$", "", line) for line in out.splitlines()
             if re.match(r"epoch \d+:", line)]
    lines += [line for line in out.splitlines() if line.startswith("test accuracy")]
    return lines


def main():
    binary, example, scratch = sys.argv[1:4]
    if not os.path.isdir(DATA):
        print(f"{DATA} not found (dataset-fashion-mnist): skipped")
        return 77
    for model, epochs, limit in (("mlp", 2, 1500), ("cnn", 1, 600)):
        opts = ["--model", model, "--epochs", str(epochs), "--limit-train", str(limit),
                "--limit-test", "500", "--seed", "3"]
        cpp = subprocess.run([binary, *opts, "--device", "cpu", "--out", scratch],
                             capture_output=True, text=True, check=True).stdout
        py = subprocess.run([sys.executable, example, *opts], capture_output=True, text=True,
                            check=True).stdout
        want, got = figures(cpp), figures(py)
        print(f"{model}: C++ {want}\n{model}: Python {got}")
        if len(want) != epochs + 1 or got != want:
            print(f"{model}: the Python example's figures differ from the C++ example's")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
