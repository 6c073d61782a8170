#!/usr/bin/env python3
"""Checks benchmarks/compare.py on the fixture pair in this folder (bench_train_step's Google
Benchmark JSON, plain and folded the way scripts/gpu_check.sh folds it, and pytorch_reference.py's
JSON) against compare_expected.txt, and pytorch_reference.py's argument handling. Exits 0 when all
pass, 1 otherwise.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
SINTER = os.path.join(HERE, "sinter_train_step.json")
PYTORCH = os.path.join(HERE, "pytorch_reference.json")


def run(script, *args):
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def main():
    with open(os.path.join(HERE, "compare_expected.txt"), encoding="utf-8") as f:
        expected = f.read()
    failures = []

    def check(what, ok, detail=""):
        print(f"{'ok    ' if ok else 'FAILED'} {what}")
        if not ok:
            failures.append(what)
            if detail:
                print(detail)

    rc, out, err = run("compare.py", SINTER, PYTORCH)
    check("compare.py on the fixture pair", rc == 0 and out == expected,
          f"rc {rc}\n--- got\n{out}{err}--- expected\n{expected}")

    with tempfile.TemporaryDirectory() as tmp:
        # scripts/gpu_check.sh folds the per-program files into one object keyed by program.
        with open(SINTER, encoding="utf-8") as f:
            folded = {"gemm": {"benchmarks": []}, "train_step": json.load(f)}
        folded_path = os.path.join(tmp, "bench.json")
        with open(folded_path, "w", encoding="utf-8") as f:
            json.dump(folded, f)
        rc, out, err = run("compare.py", folded_path, PYTORCH)
        check("compare.py on a folded bench.json", rc == 0 and out == expected,
              f"rc {rc}\n--- got\n{out}{err}")

        missing = os.path.join(tmp, "missing.json")
        rc, out, err = run("compare.py", missing, missing)
        check("compare.py without figures exits 1", rc == 1, f"rc {rc}\n{out}{err}")

    with tempfile.TemporaryDirectory() as tmp:
        # --inference: bench_inference's and onnxruntime_reference.py's JSON, one row missing on
        # each side.
        rows = [("cnn", "int8", 256, 40.0, 80.0), ("mlp", "f32", 1, 0.5, 0.25),
                ("cnn", "f32", 1, 1.0, None), ("resnet20", "f32", 256, None, 100.0)]
        for name, column in (("sinter", 3), ("ort", 4)):
            doc = {"threads": 2, "version": "9.9", "results": [
                {"model": r[0], "precision": r[1], "batch": r[2], "ms": r[column]}
                for r in rows if r[column] is not None]}
            with open(os.path.join(tmp, f"{name}.json"), "w", encoding="utf-8") as f:
                json.dump(doc, f)
        rc, out, err = run("compare.py", "--inference", os.path.join(tmp, "sinter.json"),
                           os.path.join(tmp, "ort.json"))
        want = ["| mlp | f32 | 1 | 0.500 | 0.250 | 2000 | 0.50 |",
                "| cnn | f32 | 1 | 1.000 | - | 1000 | - |",
                "| cnn | int8 | 256 | 40.000 | 80.000 | 6400 | 2.00 |",
                "| resnet20 | f32 | 256 | - | 100.000 | - | - |"]
        got = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
        check("compare.py --inference", rc == 0 and got[1:] == want, f"rc {rc}\n{out}{err}")

        # Three rounds (bench_inference --rounds 3): the ms are each side's medians over the
        # rounds, the ratio the median of the ratios within each round, with their range; a row
        # one side lacks in a round counts in the rounds that have it.
        rounds = [
            {"sinter": {("mlp", "f32", 1): 1.0, ("cnn", "f32", 256): 10.0},
             "ort": {("mlp", "f32", 1): 2.0, ("cnn", "f32", 256): 9.0}},
            {"sinter": {("mlp", "f32", 1): 4.0, ("cnn", "f32", 256): 20.0},
             "ort": {("mlp", "f32", 1): 2.0, ("cnn", "f32", 256): 30.0}},
            {"sinter": {("mlp", "f32", 1): 2.0},
             "ort": {("mlp", "f32", 1): 3.0, ("cnn", "f32", 256): 11.0}},
        ]
        paths = []
        for i, r in enumerate(rounds):
            for name in ("sinter", "ort"):
                doc = {"threads": 2, "version": "9.9", "results": [
                    {"model": k[0], "precision": k[1], "batch": k[2], "ms": ms}
                    for k, ms in r[name].items()]}
                path = os.path.join(tmp, f"{name}.round{i + 1}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
                paths.append(path)
        rc, out, err = run("compare.py", "--inference", *paths)
        # mlp: Sinter 1, 4, 2 -> 2; ONNX Runtime 2, 2, 3 -> 2; ratios 2, 0.5, 1.5 -> 1.5.
        # cnn: Sinter 10, 20 -> 15; ONNX Runtime 9, 30, 11 -> 11; ratios 0.9, 1.5 -> 1.2.
        want = ["| mlp | f32 | 1 | 2.000 | 2.000 | 500 | 1.50 (0.50, 2.00) |",
                "| cnn | f32 | 256 | 15.000 | 11.000 | 17067 | 1.20 (0.90, 1.50) |"]
        got = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
        check("compare.py --inference over rounds",
              rc == 0 and got[1:] == want and "medians of 3 rounds" in out and
              "median (min, max)" in got[0], f"rc {rc}\n{out}{err}")
        rc, out, err = run("compare.py", "--inference", *paths[:3])
        check("compare.py --inference with an odd number of files exits 2",
              rc == 2 and "pairs" in err, f"rc {rc}\n{out}{err}")
        rc, out, err = run("compare.py", *paths[:3])
        check("compare.py without --inference takes two files", rc == 2, f"rc {rc}\n{out}{err}")

    rc, out, err = run("pytorch_reference.py", "--workloads", "nope")
    check("pytorch_reference.py rejects an unknown workload", rc == 2 and "unknown workload" in err,
          f"rc {rc}\n{out}{err}")
    # Without torch this says so and exits 0; with it, one CPU (or GPU) step of the mlp.
    rc, out, err = run("pytorch_reference.py", "--smoke", "--workloads", "mlp", "--precisions",
                       "fp32")
    check("pytorch_reference.py --smoke on the mlp", rc == 0, f"rc {rc}\n{out}{err}")

    print(f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
