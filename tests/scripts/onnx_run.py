#!/usr/bin/env python3
"""Runs an ONNX model in ONNX Runtime on the tensors of a safetensors file, for Sinter's tests.

  onnx_run.py MODEL.onnx INPUTS.safetensors OUTPUTS.safetensors
      feeds each tensor of INPUTS to the model input of its name and writes every model output
      under its name to OUTPUTS (ONNX Runtime's CPU provider, all graph optimizations on).
  onnx_run.py --check
      exits 0 where onnxruntime, numpy and safetensors import.
Exit 77 (skipped) without onnxruntime, numpy or safetensors: pip install onnxruntime numpy
safetensors.
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"skipped: {e} (pip install onnxruntime numpy safetensors)")
    sys.exit(77)


def main():
    if sys.argv[1:] == ["--check"]:
        print(f"onnxruntime {ort.__version__}")
        return
    model, inputs, outputs = sys.argv[1:4]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the test suite already runs one test per core
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feed = load_file(inputs)
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feed)
    save_file({n: np.ascontiguousarray(r) for n, r in zip(names, results)}, outputs)


if __name__ == "__main__":
    main()
