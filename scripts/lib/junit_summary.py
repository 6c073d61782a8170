#!/usr/bin/env python3
"""Sums up a ctest JUnit file for scripts/gpu_check.sh: one line of counts, then each failing test
with the first lines of its failure (GoogleTest's "Failure" blocks, or the output's last lines).

usage: junit_summary.py LABEL FILE [MAX_FAILURES]
Prints "LABEL: N passed, N failed, N skipped (N tests)" and exits 0; a missing or unreadable file
prints "LABEL: no result file" and exits 1.
"""
import re
import sys
import xml.etree.ElementTree as ET

LINES_PER_FAILURE = 6


def failure_lines(output):
    lines = [l.rstrip() for l in (output or "").splitlines() if l.strip()]
    picked = []
    for i, line in enumerate(lines):
        # GoogleTest: "path:line: Failure" followed by what was expected; also thrown errors.
        if re.search(r": Failure$|C\+\+ exception|what\(\)|Error:|error:|\*\*\*|FAILED:", line):
            picked.extend(lines[i:i + 4])
        if len(picked) >= LINES_PER_FAILURE:
            break
    if not picked:
        picked = lines[-LINES_PER_FAILURE:]
    return picked[:LINES_PER_FAILURE]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    label, path = sys.argv[1], sys.argv[2]
    max_failures = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        print("%s: no result file" % label)
        return 1
    passed = failed = skipped = 0
    failures = []
    for case in root.iter("testcase"):
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed += 1
            out = case.findtext("system-out") or ""
            failures.append((case.get("name", "?"), failure_lines(out)))
        elif case.find("skipped") is not None or status in ("notrun", "disabled", "skipped"):
            skipped += 1
        else:
            passed += 1
    print("%s: %d passed, %d failed, %d skipped (%d tests)" %
          (label, passed, failed, skipped, passed + failed + skipped))
    for name, lines in failures[:max_failures]:
        print("  FAILED %s" % name)
        for line in lines:
            print("    " + line[:200])
    if len(failures) > max_failures:
        print("  ... and %d more failures (see the log)" % (len(failures) - max_failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
