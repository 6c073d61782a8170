#!/usr/bin/env python3
"""Sinter against PyTorch on the CPU in interleaved rounds, for machines whose speed drifts.

Each round times, back to back, every workload and precision asked for: Sinter at --threads,
PyTorch at --threads, then Sinter at 1 thread. The table gives each side's median over the rounds,
the median of the per-round ratios PyTorch / Sinter (above 1: Sinter is faster), its smallest and
largest round, and Sinter's parallel efficiency (1-thread ms / (threads x N-thread ms)).

  python3 benchmarks/cpu_rounds.py --bench build/benchmarks/bench_train_step --rounds 5

OPENBLAS_NUM_THREADS=1 is set for both programs (PyTorch's OpenMP threads already fill the cores).
The interpreter for PyTorch is --python (default: this one); without torch there, the PyTorch
columns stay empty.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the same readers of both programs' JSON)

HERE = os.path.dirname(os.path.abspath(__file__))


def run_sinter(bench, workload, precision, threads, env):
    """Median ms per step of one bench_train_step benchmark, or None where it failed."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [bench, "--device=cpu", f"--threads={threads}",
               f"--benchmark_filter=^train_step/{workload}/{precision}/",
               "--benchmark_repetitions=3", f"--benchmark_out={out}",
               "--benchmark_out_format=json"]
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        ms = compare.sinter_results(compare.load(out, "Sinter")).get((workload, precision))
        return ms if isinstance(ms, float) else None
    finally:
        os.unlink(out)


def run_pytorch(python, workload, precision, threads, env):
    """Median ms per step from pytorch_reference.py, or None where torch is missing or failed."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [python, os.path.join(HERE, "pytorch_reference.py"), "--device", "cpu",
               "--threads", str(threads), "--workloads", workload, "--precisions", precision,
               "--compile-precisions", "", "--out", out]
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, check=False)
        if done.returncode != 0:
            return None
        return compare.pytorch_results(compare.load(out, "PyTorch")).get((workload, precision))
    finally:
        os.unlink(out)


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="build/benchmarks/bench_train_step",
                        help="the bench_train_step binary")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter with torch (default: this one)")
    parser.add_argument("--workloads", default="mlp,cnn,resnet20,gpt-mini")
    parser.add_argument("--precisions", default="fp32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pytorch", action="store_true", help="Sinter alone")
    parser.add_argument("--no-single", action="store_true",
                        help="skip Sinter's 1-thread runs (no efficiency column)")
    parser.add_argument("--out", help="write every round's figures as JSON here")
    args = parser.parse_args()
    if not os.access(args.bench, os.X_OK):
        print(f"cpu_rounds: {args.bench} is not an executable (build the benchmarks first)",
              file=sys.stderr)
        return 2

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    cases = [(w, p) for w in args.workloads.split(",") for p in args.precisions.split(",")]
    rounds = {case: [] for case in cases}
    for r in range(args.rounds):
        for w, p in cases:
            s = run_sinter(args.bench, w, p, args.threads, env)
            t = None if args.no_pytorch else run_pytorch(args.python, w, p, args.threads, env)
            one = None if args.no_single else run_sinter(args.bench, w, p, 1, env)
            rounds[(w, p)].append({"sinter": s, "pytorch": t, "sinter_1t": one})
            print(f"round {r + 1}: {w} {p}: Sinter {fmt(s)} ms, PyTorch {fmt(t)} ms, "
                  f"Sinter 1 thread {fmt(one)} ms", file=sys.stderr, flush=True)

    n = args.threads
    print(f"{args.rounds} interleaved rounds, {n} threads; ms per step, medians over the rounds; "
          "ratio > 1: Sinter is faster")
    print(f"| workload | precision | Sinter ms | PyTorch ms | PyTorch / Sinter (min, max) | "
          f"Sinter 1 thread ms | efficiency |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for w, p in cases:
        rs = rounds[(w, p)]
        ratios = [x["pytorch"] / x["sinter"] for x in rs if x["pytorch"] and x["sinter"]]
        s = median_or_none([x["sinter"] for x in rs])
        one = median_or_none([x["sinter_1t"] for x in rs])
        effs = [x["sinter_1t"] / (n * x["sinter"]) for x in rs if x["sinter_1t"] and x["sinter"]]
        ratio = "-"
        if ratios:
            ratio = (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}, "
                     f"{max(ratios):.2f})")
        eff = f"{100 * statistics.median(effs):.0f}%" if effs else "-"
        print(f"| {w} | {p} | {fmt(s)} | {fmt(median_or_none([x['pytorch'] for x in rs]))} | "
              f"{ratio} | {fmt(one)} | {eff} |")
    if args.out:
        doc = {"threads": n, "rounds": [{"workload": w, "precision": p, "runs": rounds[(w, p)]}
                                        for w, p in cases]}
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, args.out)
    if not any(x["sinter"] for rs in rounds.values() for x in rs):
        print("cpu_rounds: no Sinter run gave a figure", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
