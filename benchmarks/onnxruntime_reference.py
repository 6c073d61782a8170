#!/usr/bin/env python3
"""ONNX Runtime's side of bench_inference: the median milliseconds of one inference of each exported
model (<dir>/<model>.f32.onnx and <model>.int8.onnx) at each batch size, on the CPU with the given
intra-op thread count and every graph optimization on, written as JSON for compare.py --inference.
Exits 77 without numpy or onnxruntime.

  onnxruntime_reference.py --dir DIR --models mlp,cnn,resnet20 --batches 1,256 --threads 2 --out F

With --append the results are added to those already in F (bench_inference --rounds runs one model
at a time, each after Sinter's run of it).
"""
import argparse
import json
import os
import statistics
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"onnxruntime_reference: {e} (pip install numpy onnxruntime)", file=sys.stderr)
    sys.exit(77)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="the folder bench_inference exported to")
    parser.add_argument("--models", default="mlp,cnn,resnet20")
    parser.add_argument("--batches", default="1,256")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--smoke", action="store_true", help="one repetition each")
    parser.add_argument("--out", required=True)
    parser.add_argument("--append", action="store_true", help="add to the results in --out")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    batches = [int(b) for b in args.batches.split(",") if b]
    results = []
    if args.append and os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as f:
            results = json.load(f).get("results", [])
    for model in [m for m in args.models.split(",") if m]:
        side = 32 if model == "resnet20" else 28
        for precision in ("f32", "int8"):
            path = os.path.join(args.dir, f"{model}.{precision}.onnx")
            if not os.path.exists(path):
                print(f"onnxruntime_reference: {path} is missing", file=sys.stderr)
                return 1
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            for batch in batches:
                x = np.random.default_rng(0).standard_normal((batch, 1, side, side),
                                                             dtype=np.float32)
                reps = 1 if args.smoke else (200 if batch == 1 else 10)
                for _ in range(2):
                    session.run(None, {"input": x})
                times = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    session.run(None, {"input": x})
                    times.append((time.perf_counter() - t0) * 1e3)
                ms = statistics.median(times)
                print(f"onnxruntime {model:9s} {precision:5s} batch {batch:4d}: {ms:9.3f} ms "
                      f"({1000.0 * batch / ms:.0f} images/s)")
                results.append({"model": model, "precision": precision, "batch": batch, "ms": ms})
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"runtime": "onnxruntime", "version": ort.__version__, "threads": args.threads,
                   "results": results}, f, indent=1)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
