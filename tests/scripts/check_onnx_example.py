#!/usr/bin/env python3
"""fashion_mnist --export-onnx, run in ONNX Runtime: the same test accuracy as Sinter's.

Trains the mlp, cnn and resnet20 for a moment on the CPU with --export-onnx, reads the first test
images with numpy (normalized as the example does, and padded to 32x32 for resnet20), classifies
them in ONNX Runtime in one batch (the file was exported with a batch of 1: its batch dim is
symbolic) and requires the accuracy the example printed, to the sample. Exit 77 (skipped) without
numpy or onnxruntime, or with a Sinter built without ONNX.

  check_onnx_example.py FASHION_MNIST_EXE DATA_DIR WORK_DIR
"""
import gzip
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e} (pip install numpy onnxruntime)")
    sys.exit(77)

TEST_SAMPLES = 500
MEAN, STD = 0.2860, 0.3530  # FashionMNIST::default_normalization()


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, ndim = int.from_bytes(data[0:4], "big"), data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    if magic >> 8 != 0x08:  # unsigned bytes
        raise ValueError(f"{path}: not an IDX file of bytes")
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data, name)):
            return os.path.join(data, name)
    raise FileNotFoundError(f"{stem}(.gz) in {data}")


def test_set(data, samples):
    """The first test images (normalized as the example does, (N, 1, 28, 28)) and labels."""
    images = read_idx(find(data, "t10k-images-idx3-ubyte"))[:samples]
    labels = read_idx(find(data, "t10k-labels-idx1-ubyte"))[:samples].astype(np.int64)
    x = ((images.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :].astype(np.float32)
    return x, labels


def run_example(exe, name, args):
    """fashion_mnist with args; its stdout. Exits 77 (skipped) for a build without ONNX."""
    run = subprocess.run([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0 and "built without ONNX" in run.stderr:
        print(f"skipped: {run.stderr.strip()}")
        sys.exit(77)
    if run.returncode != 0:
        sys.exit(f"{name}: fashion_mnist exited {run.returncode}:\n{run.stderr}")
    return run.stdout


def start(samples):
    """The arguments (EXE, DATA_DIR, WORK_DIR), WORK_DIR emptied, and `samples` test images."""
    exe, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return exe, data, work, *test_set(data, samples)


def train_and_export(exe, data, work, name, limit, samples, model, extra=()):
    """One epoch of `name` on `limit` training images on the CPU, tested on `samples` images,
    exported to `model`; returns the example's output."""
    return run_example(exe, name, [
        "--model", name, "--epochs", "1", "--limit-train", str(limit), "--batch-size", "64",
        "--limit-test", str(samples), "--device", "cpu", "--data", data, "--out",
        f"{work}/{name}", *extra, "--export-onnx", model])


def exported_models(exe, data, work, limit, samples, suffix=".onnx", extra=()):
    """The mlp, cnn and resnet20 through train_and_export, mlp and cnn on `limit` training images
    and resnet20 on 3072 (its batch-norm running statistics need more steps than the others before
    its test accuracy, in eval mode, leaves chance); yields (name, model file, the output)."""
    for name in ("mlp", "cnn", "resnet20"):
        model = f"{work}/{name}{suffix}"
        yield name, model, train_and_export(exe, data, work, name, 3072 if name == "resnet20"
                                            else limit, samples, model, extra)


def onnx_logits(model, name, x):
    """The model's outputs in ONNX Runtime (one thread) for the test images x, padded to 32x32
    for resnet20."""
    inputs = x
    if name == "resnet20":  # centred on a 32x32 background of normalized black
        inputs = np.full((len(x), 1, 32, 32), (0.0 - MEAN) / STD, np.float32)
        inputs[:, :, 2:30, 2:30] = x
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(["output"], {"input": inputs})[0]


def main():
    exe, data, work, x, labels = start(TEST_SAMPLES)
    failures = []
    for name, model, stdout in exported_models(exe, data, work, 1024, TEST_SAMPLES):
        sinter_acc = float(re.search(r"^test accuracy: ([0-9.]+)$", stdout, re.M).group(1))
        logits = onnx_logits(model, name, x)
        correct = int((logits.argmax(axis=1) == labels).sum())
        print(f"{name}: Sinter's test accuracy {sinter_acc:.4f}, ONNX Runtime's "
              f"{correct / TEST_SAMPLES:.4f} ({correct}/{TEST_SAMPLES}), logits {logits.shape}")
        if logits.shape != (TEST_SAMPLES, 10) or correct != round(sinter_acc * TEST_SAMPLES):
            failures.append(f"{name}: ONNX Runtime classified {correct}/{TEST_SAMPLES} right, "
                            f"Sinter {sinter_acc:.4f}")
        # A model that predicts one class (10%) would agree with anything: it must have learnt.
        if sinter_acc < 0.15:
            failures.append(f"{name}: {sinter_acc:.4f} after {limit // 64} steps: the model did "
                            "not train")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
