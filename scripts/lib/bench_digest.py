#!/usr/bin/env python3
"""Digests the benchmark programs' --summary_out JSON files for scripts/gpu_check.sh, short enough
for the end of a log: per program the cases ok, skipped and failed, the geometric mean and the
lowest of Sinter / reference over the cases that ran, every failed case, and the rows whose name
matches --headline (the whole table goes to the markdown file given by --tables).

usage: bench_digest.py [--headline REGEX] [--tables FILE] SUMMARY.json...
"""
import argparse
import json
import math
import re


def fmt(x):
    if x is None:
        return "-"
    return "%.3g" % x if abs(x) < 100 else "%.0f" % x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--headline", default="")
    parser.add_argument("--tables", default="")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    headline = re.compile(args.headline) if args.headline else None
    tables = []
    for path in args.files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print("%s: unreadable (%s)" % (path, e))
            continue
        program = doc.get("program", path)
        rows = doc.get("rows", [])
        ok = [r for r in rows if r.get("status") == "ok"]
        failed = [r for r in rows if str(r.get("status", "")).startswith("FAILED")]
        skipped = len(rows) - len(ok) - len(failed)
        ratios = [r["ratio"] for r in ok if isinstance(r.get("ratio"), (int, float)) and r["ratio"] > 0]
        line = "%s: %d ok, %d skipped, %d FAILED" % (program, len(ok), skipped, len(failed))
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            low = min((r for r in ok if r.get("ratio")), key=lambda r: r["ratio"])
            line += "; Sinter/reference geomean %.3f, lowest %.3f (%s)" % (geo, low["ratio"],
                                                                           low["name"])
        print(line)
        for r in failed:
            print("  %s: %s" % (r.get("name"), r.get("status")))
        for r in rows:
            if headline and headline.search(r.get("name", "")) and r not in failed:
                print("  %-58s %8s %-6s %8s %-18s %6s" % (
                    r.get("name"), fmt(r.get("sinter")), r.get("metric", ""),
                    fmt(r.get("reference_value")), r.get("reference", ""), fmt(r.get("ratio"))))
        tables.append("## %s\n\n| case | Sinter | metric | reference | ratio | status |\n"
                      "|---|---:|---|---:|---:|---|\n" % program + "".join(
                          "| %s | %s | %s | %s %s | %s | %s |\n" % (
                              r.get("name"), fmt(r.get("sinter")), r.get("metric", ""),
                              r.get("reference", ""), fmt(r.get("reference_value")),
                              fmt(r.get("ratio")), r.get("status")) for r in rows))
    if args.tables:
        with open(args.tables, "w", encoding="utf-8") as f:
            f.write("\n".join(tables))


if __name__ == "__main__":
    main()
