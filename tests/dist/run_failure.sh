#!/usr/bin/env bash
# Runs an MPI job that is meant to go wrong in a known way, under a time limit, and checks how it
# ended:  run_failure.sh (--expect-fail | --expect-ok) SECONDS [--expect-text TEXT] COMMAND...
# --expect-fail: the job must exit non-zero; --expect-ok: with 0. Running into the limit (a hang)
# fails either way. With --expect-text, TEXT must appear in the job's output.
set -u
mode=$1
limit=$2
shift 2
text=""
if [[ "${1:-}" == --expect-text ]]; then
  text=$2
  shift 2
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout --kill-after=10 "$limit" "$@" >"$out" 2>&1
rc=$?
cat "$out"
elapsed=$(($(date +%s) - start))
echo "run_failure.sh: exit code $rc after $elapsed s"
# 124 is timeout's own status; 137 (SIGKILL) alone is no sign of a hang, since mpirun exits with
# 128 + the signal of a rank that was killed.
if ((rc == 124 || elapsed >= limit)); then
  echo "FAIL: the job did not end within $limit s"
  exit 1
fi
if [[ $mode == --expect-fail ]] && ((rc == 0)); then
  echo "FAIL: expected a non-zero exit status"
  exit 1
fi
if [[ $mode == --expect-ok ]] && ((rc != 0)); then
  echo "FAIL: expected exit status 0"
  exit 1
fi
if [[ -n $text ]] && ! grep -qF -- "$text" "$out"; then
  echo "FAIL: \"$text\" is not in the output"
  exit 1
fi
echo PASS
