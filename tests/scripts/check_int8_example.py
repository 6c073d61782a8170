#!/usr/bin/env python3
"""fashion_mnist --quantize int8 --export-onnx, the QDQ model run in ONNX Runtime.

Trains the mlp, cnn and resnet20 for a moment on the CPU with --quantize int8 (calibration on a few
training batches) and --export-onnx, then classifies the same test images in ONNX Runtime and
requires: ONNX Runtime's class the same as Sinter's int8 model's (out/int8_predictions.txt) for at
least 99% of the images (the same integer sums; ONNX Runtime's fused int8 kernels requantize with
their own rounding, so a value near a rounding boundary can land one step apart, and models trained
for a moment have close logits; trained ones agree on 99.76% to 99.97%, benchmarks/README.md), the
int8 accuracy within 2 points of the f32 model's (short training
leaves logits close together; the full runs of benchmarks/README.md are within 1), and the QDQ
file at most 0.3x the size of the f32 export. Exit 77 (skipped) without numpy or onnxruntime, or
with a Sinter built without ONNX.

  check_int8_example.py FASHION_MNIST_EXE DATA_DIR WORK_DIR
"""
import os
import re
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e} (pip install numpy onnxruntime)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_onnx_example import exported_models, onnx_logits, start  # noqa: E402

TEST_SAMPLES = 1000


def figure(pattern, text, name):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit(f"{name}: no match for {pattern!r} in the output:\n{text}")
    return m.groups()


def main():
    exe, data, work, x, labels = start(TEST_SAMPLES)
    failures = []
    for name, model, stdout in exported_models(
            exe, data, work, 2048, TEST_SAMPLES, ".int8.onnx",
            ["--quantize", "int8", "--calibration-batches", "8"]):
        f32_acc, int8_acc = map(float, figure(r"^accuracy\s+([0-9.]+)\s+([0-9.]+)$", stdout, name))
        f32_mb, int8_mb = map(float, figure(r"^onnx\s+([0-9.]+)M\s+([0-9.]+)M$", stdout, name))
        logits = onnx_logits(model, name, x)
        correct = int((logits.argmax(axis=1) == labels).sum())
        size = os.path.getsize(model) / 1e6
        print(f"{name}: f32 {f32_acc:.4f}, Sinter int8 {int8_acc:.4f}, ONNX Runtime int8 "
              f"{correct / TEST_SAMPLES:.4f}; onnx f32 {f32_mb:.2f} MB, int8 {int8_mb:.2f} MB "
              f"(file {size:.2f} MB)")
        with open(f"{work}/{name}/int8_predictions.txt") as f:
            ours = np.array([int(line) for line in f], np.int64)
        agree = int((ours == logits.argmax(axis=1)).sum())
        print(f"{name}: the same class in ONNX Runtime and Sinter for {agree}/{TEST_SAMPLES}")
        if ours.shape != (TEST_SAMPLES,) or agree < 0.99 * TEST_SAMPLES:
            failures.append(f"{name}: ONNX Runtime and Sinter's int8 agree on {agree}/"
                            f"{TEST_SAMPLES} images")
        if abs(correct - int8_acc * TEST_SAMPLES) > 0.005 * TEST_SAMPLES:
            failures.append(f"{name}: ONNX Runtime classified {correct}/{TEST_SAMPLES} right, "
                            f"Sinter's int8 {int8_acc:.4f}")
        if int8_acc < f32_acc - 0.02:
            failures.append(f"{name}: int8 accuracy {int8_acc:.4f} against f32 {f32_acc:.4f}")
        if int8_mb > 0.3 * f32_mb or abs(size - int8_mb) > 0.01:
            failures.append(f"{name}: the int8 export is {int8_mb:.2f} MB against {f32_mb:.2f} MB")
        if f32_acc < 0.15:
            failures.append(f"{name}: {f32_acc:.4f}: the model did not train")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
