# Sourced by scripts/test.sh and scripts/sanitize.sh: prints "<script>: exit <status> after <N>s"
# when the script ends, however it ends.
# shellcheck shell=bash

sinter_exit_time_start=$(date +%s)
sinter_report_exit_time() {
  local rc=$?
  echo "scripts/$(basename "$0"): exit $rc after $(( $(date +%s) - sinter_exit_time_start ))s"
}
trap sinter_report_exit_time EXIT
