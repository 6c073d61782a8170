#!/usr/bin/env bash
# Runs one libFuzzer target for CTest: first every committed regression input once (each must pass),
# then RUNS inputs from a copy of the seed corpus (the copy gets what the fuzzer finds; the
# repository's seeds stay as they are), with a fixed seed so that a run can be repeated.
#   run_fuzz.sh BINARY SEEDS_DIR REGRESSIONS_DIR WORK_DIR RUNS
# A crash, a leak, a sanitizer report or an abort of the target fails the test; libFuzzer writes
# the input to WORK_DIR/crash-* (or leak-*, oom-*, timeout-*): commit it under REGRESSIONS_DIR with
# the fix.
set -euo pipefail
binary=$1 seeds=$2 regressions=$3 work=$4 runs=$5

rm -rf "$work"
mkdir -p "$work/corpus"
cp "$seeds"/* "$work/corpus/"
cd "$work"
if compgen -G "$regressions/*" >/dev/null; then
  echo "== $(basename "$binary"): $(find "$regressions" -type f | wc -l) regression input(s)"
  "$binary" -rss_limit_mb=2048 $(find "$regressions" -type f | sort)
fi
echo "== $(basename "$binary"): $runs inputs from $(find "$work/corpus" -type f | wc -l) seed(s)"
"$binary" -runs="$runs" -seed=1 -max_len=8192 -rss_limit_mb=2048 -timeout=20 \
  -print_final_stats=1 corpus
