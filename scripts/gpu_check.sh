#!/usr/bin/env bash
# Sinter's checks on a GPU machine, in stages that each end within a time limit with a short summary:
#   tests     the `gpu` tests, then the rest of the suite; each failing test with its first lines
#   sanitize  compute-sanitizer: memcheck over the CUDA parity, size and FP8 tests, racecheck and
#             synccheck over the GEMM, convolution, reduction, softmax, norm and FP8 quantization tests
#             at small shapes, initcheck over the op table; each tool's error count and first report
#   bench     every benchmark program in its short mode, then the PyTorch reference and compare.py;
#             the ratio tables last
#   train     the cnn on Fashion-MNIST for 2 epochs on the GPU, then 1 epoch under mpirun -np 1 --ddp
#   all       those four in order; with --budget SECONDS, a stage whose limit would overrun the
#             budget is skipped
#
# usage: scripts/gpu_check.sh [--bundle DIR] [--stage NAME] [--budget SECONDS] OUTDIR
#   --bundle DIR  run from a bundle made by scripts/gpu_bundle.sh (nothing is compiled); without it
#                 the tree is built first, with CUDA on every core, in SINTER_BUILD_DIR (build-gpu)
#   --stage NAME  tests, sanitize, bench, train or all (the default)
# OUTDIR receives at most 6 files: summary.txt (every stage's summary, also printed last), the full
# log of each stage run (tests.log, sanitize.log, bench.log, train.log) and bench.json (every
# benchmark's JSON). Stage limits in seconds: SINTER_GPU_CHECK_LIMIT_TESTS (default 420), ..._SANITIZE
# (420), ..._BENCH (450), ..._TRAIN (300). SINTER_COMMIT names the commit in a tree without .git.
# For a short GPU run: SINTER_GPU_CHECK_REST=0 runs only the `gpu` tests (the rest pass on any
# CPU); SINTER_GPU_CHECK_BENCH lists the benchmark programs as name:seconds:filter entries
# separated by spaces (default below); SINTER_GPU_CHECK_EXTRAS=0 leaves out bench_allreduce and
# the PyTorch reference.
# Without a GPU it exits at once with status 3. Otherwise it exits 1 when a stage failed or ran out
# of time, 2 on bad usage, 0 when everything passed.
set -uo pipefail

usage() {
  sed -n '/^# usage:/,/^#   --stage/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
bundle="" stage=all budget="" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) [ $# -ge 2 ] || usage; bundle=$2; shift 2 ;;
    --stage) [ $# -ge 2 ] || usage; stage=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || usage; budget=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "gpu_check: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
case $stage in tests|sanitize|bench|train|all) ;; *) echo "gpu_check: unknown stage $stage" >&2; usage ;; esac
if [ -n "$budget" ] && ! [[ $budget =~ ^[0-9]+$ ]]; then
  echo "gpu_check: --budget takes whole seconds, not '$budget'" >&2
  usage
fi

# --- a GPU, or nothing to do ---
gpus=$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)
if [ -z "$gpus" ]; then
  echo "gpu_check: no NVIDIA GPU on this machine (nvidia-smi lists none): nothing was checked." >&2
  echo "gpu_check: run it on the GPU machine; here, scripts/test.sh runs the suite (GPU tests skip)." >&2
  exit 3
fi

mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$(date +%s)
jobs=$(nproc)
summary="$out/summary.txt"
: >"$summary"
# The GPU machine keeps ninja in its PyTorch environment (a build without --bundle uses it).
export PATH="/usr/local/cuda/bin:$PATH:/opt/torch/.venv/bin"

# say LINE...: a summary line, printed now and kept for the final summary.
say() { printf '%s\n' "$@" | tee -a "$summary"; }

# --- the suite's runner: the bundle's, or one over a fresh build of this tree ---
if [ -n "$bundle" ]; then
  if [ ! -x "$bundle/run" ] || [ ! -f "$bundle/BUNDLE.txt" ]; then
    echo "gpu_check: $bundle is not a bundle (no run and BUNDLE.txt; make one with scripts/gpu_bundle.sh)" >&2
    exit 2
  fi
  bundle=$(cd "$bundle" && pwd)
  root=$("$bundle/run" --root) || { echo "gpu_check: cannot unpack $bundle" >&2; exit 1; }
  commit=${SINTER_COMMIT:-$(sed -n 's/^commit: //p' "$bundle/BUNDLE.txt")}
  built="bundle $(sed -n 's/^built: //p' "$bundle/BUNDLE.txt")"
else
  build_dir=$(mkdir -p "${SINTER_BUILD_DIR:-build-gpu}" && cd "${SINTER_BUILD_DIR:-build-gpu}" && pwd)
  generator=()
  if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  build_start=$(date +%s)
  { cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSINTER_CUDA=ON &&
      cmake --build "$build_dir" -j "$jobs"; } >"$out/build.log" 2>&1 ||
    { tail -n 40 "$out/build.log"; echo "gpu_check: the build failed (see build.log)" >&2; exit 1; }
  # The same layout as an unpacked bundle, made of links, so that every stage runs one way.
  root="$build_dir/gpu-check-root"
  mkdir -p "$root/lib"
  ln -sfn "$build_dir" "$root/build"
  ln -sfn "$repo" "$root/source"
  cp "$repo/scripts/lib/bundle_run.sh" "$root/run"
  commit=${SINTER_COMMIT:-$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
  if [ -z "${SINTER_COMMIT:-}" ] && ! git -C "$repo" diff --quiet HEAD 2>/dev/null; then
    commit="$commit + uncommitted changes"
  fi
  built="built here in $(( $(date +%s) - build_start ))s"
fi
run="$root/run"
src="$root/source"
lib="$repo/scripts/lib"  # this script's helpers, beside it
say "Sinter GPU check  $(date -u '+%Y-%m-%d %H:%M UTC')  commit $commit  ($built)" "$gpus"

limit_of() {
  case $1 in
    tests) echo "${SINTER_GPU_CHECK_LIMIT_TESTS:-420}" ;;
    sanitize) echo "${SINTER_GPU_CHECK_LIMIT_SANITIZE:-420}" ;;
    bench) echo "${SINTER_GPU_CHECK_LIMIT_BENCH:-450}" ;;
    train) echo "${SINTER_GPU_CHECK_LIMIT_TRAIN:-300}" ;;
  esac
}
# Seconds left to the running stage, keeping `margin` for its summary; at least 1.
left() {
  local l=$(( stage_limit - ($(date +%s) - stage_start) - ${1:-15} ))
  [ "$l" -gt 0 ] && echo "$l" || echo 1
}
# timed LOG SECONDS CMD...: runs CMD with output appended to LOG, killed after SECONDS; its status.
timed() {
  local log=$1 secs=$2
  shift 2
  timeout --kill-after=10 "$secs" "$@" >>"$log" 2>&1
}
valid_json() {  # whether FILE exists and parses
  [ -f "$1" ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" >/dev/null 2>&1
}
status_of() {  # a status word for an exit code
  case $1 in 0) echo ok ;; 124|137) echo "TIMED OUT" ;; *) echo "FAILED (exit $1)" ;; esac
}

failed=0

# --- tests: the gpu label first, then the rest ---
stage_tests() {
  local log="$out/tests.log" label rc
  : >"$log"
  local labels=(gpu rest)
  [ "${SINTER_GPU_CHECK_REST:-1}" = 0 ] && labels=(gpu)
  for label in "${labels[@]}"; do
    local select=(-L gpu) junit
    [ "$label" = rest ] && select=(-LE gpu)
    junit=$(mktemp --suffix=.xml)
    echo "== ctest ${select[*]}" >>"$log"
    timed "$log" "$(left)" "$run" ctest "${select[@]}" -j "$jobs" --output-on-failure \
      --no-tests=error --output-junit "$junit"
    rc=$?
    if [ "$rc" -ne 0 ]; then failed=1; fi
    if ! python3 "$lib/junit_summary.py" "$label tests" "$junit" | tee -a "$summary"; then
      say "$label tests: $(status_of "$rc"), no JUnit result; the log's failing tests:"
      grep -a -E '\*\*\*(Failed|Timeout|Exception)' "$log" | sed 's/^/  /' | head -n 20 | tee -a "$summary"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      say "$label tests: TIMED OUT"
    fi
    rm -f "$junit"
  done
}

# --- sanitize: four compute-sanitizer tools side by side, each over its own selection ---
stage_sanitize() {
  local log="$out/sanitize.log" tool filter tmp pids=() tools=(memcheck racecheck synccheck initcheck)
  : >"$log"
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    say "sanitize: compute-sanitizer not found"
    failed=1
    return
  fi
  # Small shapes for the hazard checkers, which track every shared-memory access.
  local small='CudaGemmPaths.SimtEveryDtypeAndLayout:CudaGemmPaths.MmaSyncEveryTensorCoreTypeAndLayout'
  small+=':CudaGemmPaths.WgmmaHalfTypesEveryLayout:CudaGemmPaths.WgmmaTf32KMajorOperands'
  small+=':CudaConvPool.Conv2dMatchesCpu:CudaConvPool.Conv2dTensorCoreBf16F16:CudaConvPool.PoolsMatchCpu'
  small+=':CudaLoss.*:CudaNorm.*:CudaSizes.ReductionsOverLongAndManyRows:CudaSizes.HalfRowReductionsAtEveryAlignment'
  small+=':CudaFp8.QuantizeAndAmaxMatchCpu:CudaFp8.QuantizeWithTransposeMatchesCpu'
  tmp=$(mktemp -d)
  # memcheck and initcheck see allocations, not tensors: with the caching allocator off, every
  # tensor is its own cudaMalloc, so a read past its end or of bytes never written is reported.
  local caching
  for tool in "${tools[@]}"; do
    caching=SINTER_CUDA_NO_CACHING=1
    case $tool in
      # Not the 2^32-element iterations: 16 GB, every byte checked, would take the stage.
      memcheck) filter='*/CudaParity.*:CudaSizes.*:CudaFp8.*-CudaSizes.ElementwisePast32BitIndexing' ;;
      initcheck) filter='*/CudaParity.*' ;;
      *) filter=$small caching=SINTER_CUDA_NO_CACHING=0 ;;
    esac
    echo "== $caching $tool --gtest_filter=$filter" >"$tmp/$tool.log"
    timed "$tmp/$tool.log" "$(left 20)" "$run" env "$caching" compute-sanitizer --tool "$tool" \
      --print-limit 20 --error-exitcode 99 "$root/build/tests/sinter_tests" \
      --gtest_filter="$filter" &
    pids+=($!)
  done
  local i rc errors first
  for i in "${!tools[@]}"; do
    tool=${tools[$i]}
    wait "${pids[$i]}"
    rc=$?
    cat "$tmp/$tool.log" >>"$log"
    errors=$(grep -a -o -E '(ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazard[^)]*\))' \
      "$tmp/$tool.log" | tail -n 1)
    local tests_line
    tests_line=$(grep -a -E '^\[  (PASSED|FAILED)  \]' "$tmp/$tool.log" | head -n 1)
    say "$tool: $(status_of "$rc"); ${errors:-no sanitizer summary}; ${tests_line:-no test result}"
    if [ "$rc" -ne 0 ]; then failed=1; fi
    first=$(grep -a '^========= ' "$tmp/$tool.log" |
      grep -a -v -E 'COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|^========= *$' | head -n 8)
    if [ -n "$first" ]; then say "  first report:" "$(sed 's/^/    /' <<<"$first")"; fi
  done
  rm -rf "$tmp"
}

# --- bench: each program in short mode, then PyTorch and the comparison ---
stage_bench() {
  local log="$out/bench.log" json_dir name rc
  : >"$log"
  json_dir=$(mktemp -d)
  # name:seconds:filter; the filters drop the square sizes between the ones kept. The shares, with
  # bench_allreduce's 30 s, leave about 90 s of the default 450 to PyTorch.
  local programs=(
    "gemm:100:-gemm/.*/square/.*_m(512|2048)_.*"
    "conv:70:"
    "memory:40:"
    "elementwise:25:"
    "train_step:50:"
    "attention:35:-.*_t256_.*"
  )
  if [ -n "${SINTER_GPU_CHECK_BENCH:-}" ]; then
    read -r -a programs <<<"$SINTER_GPU_CHECK_BENCH"
  fi
  local entry secs filter args reserve=100  # bench_allreduce's and PyTorch's share
  [ "${SINTER_GPU_CHECK_EXTRAS:-1}" = 0 ] && reserve=20
  for entry in "${programs[@]}"; do
    IFS=: read -r name secs filter <<<"$entry"
    if [ ! -x "$root/build/benchmarks/bench_$name" ]; then
      say "bench_$name: not built"
      failed=1
      continue
    fi
    [ "$secs" -gt "$(left "$reserve")" ] && secs=$(left "$reserve")
    args=(--short --summary_out="$json_dir/$name.json" --benchmark_color=false
          --benchmark_out="$json_dir/gbench_$name.json" --benchmark_out_format=json)
    [ -n "$filter" ] && args+=(--benchmark_filter="$filter")
    echo "== bench_$name ${args[*]}" >>"$log"
    timed "$log" "$secs" "$run" "bench_$name" "${args[@]}"
    rc=$?
    say "bench_$name: $(status_of "$rc")"
    [ "$rc" -ne 0 ] && failed=1
  done
  if [ "${SINTER_GPU_CHECK_EXTRAS:-1}" = 0 ]; then
    say "bench_allreduce, pytorch_reference: not run (SINTER_GPU_CHECK_EXTRAS=0)"
  elif [ -x "$root/build/benchmarks/bench_allreduce" ] && command -v mpirun >/dev/null 2>&1; then
    echo "== mpirun -np 1 bench_allreduce" >>"$log"
    secs=30
    [ "$secs" -gt "$(left 60)" ] && secs=$(left 60)
    timed "$log" "$secs" "$run" mpirun -np 1 "$root/build/benchmarks/bench_allreduce" \
      --max-bytes=67108864 --summary_out="$json_dir/allreduce.json"
    rc=$?
    say "bench_allreduce (mpirun -np 1): $(status_of "$rc")"
    [ "$rc" -ne 0 ] && failed=1
  else
    say "bench_allreduce: not run (not built, or no mpirun)"
  fi

  # The same training steps in PyTorch eager, where a CUDA-enabled torch is installed.
  local python=python3 compare=""
  [ -x /opt/torch/.venv/bin/python3 ] && python=/opt/torch/.venv/bin/python3
  if [ "${SINTER_GPU_CHECK_EXTRAS:-1}" = 0 ]; then
    :
  elif "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    echo "== pytorch_reference" >>"$log"
    # Eager only: torch.compile takes minutes on a machine without its cache. The JSON is
    # rewritten after every workload, so a run cut short still compares what it measured.
    PYTHONUNBUFFERED=1 timed "$log" "$(left 20)" "$python" "$src/benchmarks/pytorch_reference.py" \
      --compile-precisions '' --out "$json_dir/pytorch_reference.json"
    rc=$?
    say "pytorch_reference: $(status_of "$rc")"
    [ "$rc" -ne 0 ] && failed=1
    if valid_json "$json_dir/gbench_train_step.json" && valid_json "$json_dir/pytorch_reference.json"; then
      compare=$("$python" "$src/benchmarks/compare.py" "$json_dir/gbench_train_step.json" \
        "$json_dir/pytorch_reference.json" 2>&1)
      { echo "== compare"; echo "$compare"; } >>"$log"
    fi
  else
    say "pytorch_reference: skipped (no CUDA-enabled torch for $python)"
  fi

  # The JSON files folded into one (the machine returns few files); the digest and tables last. A
  # program killed at its time limit leaves a file cut short: it is named, and left out.
  shopt -s nullglob
  local jsons=() summaries=() j sep=""
  for j in "$json_dir"/*.json; do
    if valid_json "$j"; then jsons+=("$j"); else say "$(basename "$j"): cut short, left out"; fi
  done
  {
    echo "{"
    for j in "${jsons[@]}"; do
      printf '%s"%s": ' "$sep" "$(basename "$j" .json)"
      cat "$j"
      sep=","
    done
    echo "}"
  } >"$out/bench.json"
  for j in "$json_dir"/{gemm,conv,memory,elementwise,train_step,attention,allreduce}.json; do
    valid_json "$j" && summaries+=("$j")
  done
  shopt -u nullglob
  if [ ${#summaries[@]} -gt 0 ]; then
    python3 "$lib/bench_digest.py" --tables "$json_dir/tables.md" \
      --headline '^(gemm/[a-z0-9]+/auto/square/|conv/bf16/|train_step/|[a-z_]+/(f32|bf16)/[0-9]|allreduce/(1|16) MB)' \
      "${summaries[@]}" | tee -a "$summary"
    { echo "== tables"; cat "$json_dir/tables.md"; } >>"$log"
  fi
  if [ -n "$compare" ]; then say "Sinter against PyTorch eager (compare.py):" "$compare"; fi
  rm -rf "$json_dir"
}

# --- train: the cnn on the GPU, then the data-parallel path under MPI ---
stage_train() {
  local log="$out/train.log" tmp rc data
  : >"$log"
  data=$("$run" sh -c 'echo "$SINTER_FMNIST_DIR"')
  if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    say "train: no Fashion-MNIST files in $data (bundle made with --no-data, or DIR.data not carried?)"
    failed=1
    return
  fi
  tmp=$(mktemp -d)
  # epoch_line DIR: "accuracy A, S s/epoch" from the example's metrics.csv.
  epoch_line() {
    [ -f "$1/metrics.csv" ] || { printf 'no epoch finished'; return; }
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
             {acc = $col["test_acc"]; s += $col["seconds"]; n++}
             END {if (n) printf "test accuracy %.4f after %d epoch(s), %.1f s/epoch", acc, n, s / n;
                  else printf "no epoch finished"}' "$1/metrics.csv" 2>/dev/null
  }
  echo "== fashion_mnist --model cnn --epochs 2 --device cuda" >>"$log"
  timed "$log" "$(left 120)" "$run" fashion_mnist --model cnn --epochs 2 --device cuda \
    --data "$data" --out "$tmp/cnn" --min-accuracy 0.80
  rc=$?
  say "cnn, 2 epochs, cuda: $(status_of "$rc"); $(epoch_line "$tmp/cnn")"
  [ "$rc" -ne 0 ] && failed=1
  if command -v mpirun >/dev/null 2>&1; then
    echo "== mpirun -np 1 fashion_mnist --ddp --model cnn --epochs 1 --device cuda" >>"$log"
    timed "$log" "$(left)" "$run" mpirun -np 1 "$root/build/examples/fashion_mnist" --ddp \
      --model cnn --epochs 1 --device cuda --data "$data" --out "$tmp/ddp" --min-accuracy 0.80
    rc=$?
    say "cnn, 1 epoch, mpirun -np 1 --ddp (NCCL): $(status_of "$rc"); $(epoch_line "$tmp/ddp")"
    [ "$rc" -ne 0 ] && failed=1
  else
    say "ddp: not run (no mpirun)"
    failed=1
  fi
  # The progress bar redraws with \r: one line per redraw in the log.
  tr '\r' '\n' <"$log" >"$tmp/log" && mv "$tmp/log" "$log"
  rm -rf "$tmp"
}

stages=("$stage")
[ "$stage" = all ] && stages=(tests sanitize bench train)
for s in "${stages[@]}"; do
  stage_limit=$(limit_of "$s")
  elapsed=$(( $(date +%s) - start ))
  if [ -n "$budget" ] && [ $(( elapsed + stage_limit )) -gt "$budget" ]; then
    say "" "== $s: skipped (its limit ${stage_limit}s would overrun the budget: ${elapsed}s of ${budget}s used)"
    continue
  fi
  say "" "== $s (limit ${stage_limit}s)"
  stage_start=$(date +%s)
  "stage_$s"
  say "$s: $(( $(date +%s) - stage_start ))s"
done
say "" "total: $(( $(date +%s) - start ))s; logs in $out"

# The caller may see only the end of the output: every summary again, last.
if [ ${#stages[@]} -gt 1 ]; then
  echo
  echo "======== summary ========"
  cat "$summary"
fi
exit "$failed"
