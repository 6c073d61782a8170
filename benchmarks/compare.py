#!/usr/bin/env python3
"""Sinter against PyTorch per training step: reads bench_train_step's Google Benchmark JSON (or the
bench.json that scripts/gpu_check.sh folds several into) and pytorch_reference.py's JSON, and prints
a markdown table. Ratio = PyTorch ms / Sinter ms, so above 1 means Sinter is faster.

  python3 benchmarks/compare.py bench_train_step.json pytorch_reference.json

With --inference it reads bench_inference's and onnxruntime_reference.py's JSON instead and prints
Sinter against ONNX Runtime per model, precision and batch (ratio = ONNX Runtime ms / Sinter ms).
Several pairs of files are rounds of one run (bench_inference --rounds N): each round's ratio is
taken within the round, and the table gives the medians over the rounds, the ratios' with their
range.

  python3 benchmarks/compare.py --inference sinter.json ort.json [sinter2.json ort2.json ...]

A missing file, benchmark or entry leaves "-" in its cells; a Sinter benchmark that failed shows
"error". Exits 1 only when no file yields a single figure, 2 on bad arguments (an odd number of
--inference files).
"""

import argparse
import json
import statistics
import sys

WORKLOAD_ORDER = ("mlp", "cnn", "resnet20", "gpt-mini", "llama-mini", "vit-tiny")
PRECISION_ORDER = ("fp32", "tf32", "bf16")
ERROR = "error"


def canonical(workload):
    # gpt_mini and gpt-mini name the same workload.
    return workload.replace("_", "-")


def load(path, what):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare: cannot read the {what} JSON {path}: {e}", file=sys.stderr)
        return None


def benchmark_lists(doc):
    """The "benchmarks" lists in a Google Benchmark document, or in each member of a folded one."""
    if not isinstance(doc, dict):
        return []
    if isinstance(doc.get("benchmarks"), list):
        return [doc["benchmarks"]]
    return [v["benchmarks"] for v in doc.values()
            if isinstance(v, dict) and isinstance(v.get("benchmarks"), list)]


def sinter_results(doc):
    """{(workload, precision): ms or ERROR} from train_step/<workload>/<precision>[/...] entries.

    With repetitions, the "median" aggregate wins; otherwise the median of the iteration runs."""
    runs, medians, errors = {}, {}, set()
    for benchmarks in benchmark_lists(doc):
        for b in benchmarks:
            parts = str(b.get("name", "")).split("/")
            if len(parts) < 3 or parts[0] != "train_step":
                continue
            key = (canonical(parts[1]), parts[2])
            if b.get("error_occurred") or b.get("skipped"):
                errors.add(key)
                continue
            ms = b.get("ms_per_step")
            if not isinstance(ms, (int, float)):
                continue
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    medians[key] = float(ms)
            else:
                runs.setdefault(key, []).append(float(ms))
    out = {key: ERROR for key in errors}
    out.update({key: statistics.median(v) for key, v in runs.items()})
    out.update(medians)
    return out


def result_rows(doc):
    """The dicts of a reference JSON's "results" list (none for anything else)."""
    if not isinstance(doc, dict):
        return []
    return [r for r in doc.get("results") or [] if isinstance(r, dict)]


def pytorch_results(doc):
    """{(workload, precision): ms} from pytorch_reference.py's "results" list."""
    out = {}
    for r in result_rows(doc):
        ms = r.get("ms_per_step")
        if isinstance(ms, (int, float)) and "workload" in r and "precision" in r:
            out[(canonical(str(r["workload"])), str(r["precision"]))] = float(ms)
    return out


def order(key):
    def rank(value, known):
        return (known.index(value), "") if value in known else (len(known), value)

    return rank(key[0], WORKLOAD_ORDER) + rank(key[1], PRECISION_ORDER)


def cell(ms):
    if ms is None:
        return "-"
    return ms if ms == ERROR else f"{ms:.3f}"


def table(sinter, pytorch):
    lines = ["| workload | precision | Sinter ms | PyTorch ms | PyTorch / Sinter |",
             "|---|---|---:|---:|---:|"]
    for key in sorted(set(sinter) | set(pytorch), key=order):
        s, p = sinter.get(key), pytorch.get(key)
        ratio = "-"
        if isinstance(s, float) and isinstance(p, float) and s > 0:
            ratio = f"{p / s:.2f}"
        lines.append(f"| {key[0]} | {key[1]} | {cell(s)} | {cell(p)} | {ratio} |")
    return "\n".join(lines)


def inference_results(doc):
    """{(model, precision, batch): ms} from the "results" list of bench_inference's or
    onnxruntime_reference.py's JSON."""
    out = {}
    for r in result_rows(doc):
        ms, batch = r.get("ms"), r.get("batch")
        if isinstance(ms, (int, float)) and isinstance(batch, int) and "model" in r:
            out[(canonical(str(r["model"])), str(r.get("precision", "?")), batch)] = float(ms)
    return out


def inference_table(rounds):
    """rounds: [(sinter, ort)], each {(model, precision, batch): ms} from one round."""
    several = len(rounds) > 1
    lines = ["| model | precision | batch | Sinter ms | ONNX Runtime ms | Sinter images/s | "
             "ONNX Runtime / Sinter" + (", median (min, max)" if several else "") + " |",
             "|---|---|---:|---:|---:|---:|---:|"]
    precisions = ("f32", "int8")

    def key_order(key):
        model, precision, batch = key
        m = WORKLOAD_ORDER.index(model) if model in WORKLOAD_ORDER else len(WORKLOAD_ORDER)
        p = precisions.index(precision) if precision in precisions else len(precisions)
        return (m, model, p, precision, batch)

    def median(values):
        return statistics.median(values) if values else None

    keys = set()
    for sinter, ort in rounds:
        keys |= set(sinter) | set(ort)
    for key in sorted(keys, key=key_order):
        s = median([r[0][key] for r in rounds if key in r[0]])
        o = median([r[1][key] for r in rounds if key in r[1]])
        # Each round's ratio within the round: the machine's speed drifts between rounds.
        ratios = [r[1][key] / r[0][key] for r in rounds
                  if r[0].get(key) and r[1].get(key) is not None]
        ratio = "-"
        if ratios:
            ratio = f"{statistics.median(ratios):.2f}"
            if several:
                ratio += f" ({min(ratios):.2f}, {max(ratios):.2f})"
        rate = f"{1000.0 * key[2] / s:.0f}" if s else "-"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {cell(s)} | {cell(o)} | {rate} | "
                     f"{ratio} |")
    return "\n".join(lines)


def main_inference(paths):
    if len(paths) % 2:
        print("compare: --inference takes pairs of files (Sinter's, then ONNX Runtime's)",
              file=sys.stderr)
        return 2
    rounds, docs = [], []
    for i in range(0, len(paths), 2):
        sinter_doc = load(paths[i], "Sinter")
        ort_doc = load(paths[i + 1], "ONNX Runtime")
        docs.append((sinter_doc, ort_doc))
        rounds.append((inference_results(sinter_doc), inference_results(ort_doc)))
    if not any(s or o for s, o in rounds):
        print("compare: no inference figures in any file")
        return 1
    # The header's facts from the first round whose files were read.
    sinter_doc = next((d[0] for d in docs if isinstance(d[0], dict)), None)
    ort_doc = next((d[1] for d in docs if isinstance(d[1], dict)), None)
    threads = (sinter_doc or {}).get("threads", "?") if isinstance(sinter_doc, dict) else "?"
    version = ort_doc.get("version", "?") if isinstance(ort_doc, dict) else "?"
    cpu = sinter_doc.get("cpu") if isinstance(sinter_doc, dict) else None
    if cpu:
        print(f"CPU: {cpu}")
    print(f"ONNX Runtime {version}, {threads} threads each; ms per batch, medians"
          + (f" of {len(rounds)} rounds" if len(rounds) > 1 else "")
          + "; ratio > 1: Sinter is faster")
    print(inference_table(rounds))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inference", action="store_true",
                        help="bench_inference's and onnxruntime_reference.py's JSON")
    parser.add_argument("sinter_json", help="bench_train_step's JSON, or the folded bench.json")
    parser.add_argument("pytorch_json", help="pytorch_reference.py's --out JSON")
    parser.add_argument("more", nargs="*",
                        help="with --inference: further pairs of files, one pair a round")
    args = parser.parse_args()
    if args.inference:
        return main_inference([args.sinter_json, args.pytorch_json] + args.more)
    if args.more:
        parser.error("further files only with --inference")

    sinter_doc = load(args.sinter_json, "Sinter")
    pytorch_doc = load(args.pytorch_json, "PyTorch")
    sinter = sinter_results(sinter_doc)
    pytorch = pytorch_results(pytorch_doc)
    if not sinter and not pytorch:
        print("compare: no training-step figures in either file")
        return 1
    if isinstance(pytorch_doc, dict) and pytorch_doc.get("device"):
        print(f"PyTorch {pytorch_doc.get('torch', '?')} on {pytorch_doc['device']}; ms per step, "
              "medians; ratio > 1: Sinter is faster")
    print(table(sinter, pytorch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
