#!/usr/bin/env bash
# On the GPU machine (Ubuntu, no network, see DEVICE.md): builds Sinter with CUDA on every core, runs
# the `gpu` tests, then the rest of the suite, then every benchmark (bench_allreduce under
# `mpirun -np 1`), trains the Fashion-MNIST example with --ddp under `mpirun -np 1` for one epoch
# (its output goes to test.log), and prints a summary table last.
# Where python3 imports a CUDA-enabled PyTorch, benchmarks/pytorch_reference.py times the same
# training steps and benchmarks/compare.py adds the Sinter/PyTorch table to the summary.
# OUTDIR gets at most 8 files: build.log, test.log, bench.log, kernels.log (scripts/check_kernels.sh),
# summary.txt and the JSON results, bench_<name>.json and pytorch_reference.json each, or all of them
# in one bench.json when there are more than three.
# Installs nothing. Exits nonzero when the build, a test, a benchmark, the kernel check or the PyTorch
# script failed; the summary is written either way. Env: SINTER_BUILD_DIR (default build-gpu),
# SINTER_COMMIT (the commit to name in the summary, for copies of the tree without .git).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu_check.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
start=$(date +%s)

export PATH="/usr/local/cuda/bin:/opt/torch/.venv/bin:$PATH"
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  if [ -d "$dir" ]; then
    LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
export LD_LIBRARY_PATH

build_dir=$(mkdir -p "${SINTER_BUILD_DIR:-build-gpu}" && cd "${SINTER_BUILD_DIR:-build-gpu}" && pwd)
jobs=$(nproc)
device=$(nvidia-smi -L 2>&1 | head -n 4)
echo "$device"

# --- build ---
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
build_start=$(date +%s)
{
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSINTER_CUDA=ON &&
    cmake --build "$build_dir" -j "$jobs"
} 2>&1 | tee "$out/build.log"
build_rc=${PIPESTATUS[0]}
build_s=$(( $(date +%s) - build_start ))

# --- the kernels' instructions and resource usage (wgmma/TMA in the sm_90a GEMM, no spills) ---
if [ "$build_rc" -eq 0 ]; then
  scripts/check_kernels.sh "$build_dir" >"$out/kernels.log" 2>&1
  kernels_rc=$?
else
  echo "not run: the build failed" >"$out/kernels.log"
  kernels_rc=1
fi

# --- tests: the gpu label, then everything else (together, the full suite) ---
# Prints "total failed skipped" from a ctest JUnit file.
junit_counts() {
  local head
  head=$(tr '\n\t' '  ' <"$1" 2>/dev/null | grep -m1 -o '<testsuite [^>]*>') || { echo "0 0 0"; return; }
  local attr total failed skipped
  for attr in tests failures skipped; do
    local value
    value=$(sed -n "s/.* $attr=\"\([0-9]*\)\".*/\1/p" <<<"$head")
    case $attr in
      tests) total=${value:-0} ;;
      failures) failed=${value:-0} ;;
      skipped) skipped=${value:-0} ;;
    esac
  done
  echo "$total $failed $skipped"
}

: >"$out/test.log"
test_rc=0
declare -A counts
for label in gpu other; do
  junit="$build_dir/junit-$label.xml"
  rm -f "$junit"
  if [ "$build_rc" -ne 0 ]; then
    counts[$label]="0 0 0"
    continue
  fi
  if [ "$label" = gpu ]; then select=(-L gpu); else select=(-LE gpu); fi
  echo "== ctest ${select[*]}" | tee -a "$out/test.log"
  ctest --test-dir "$build_dir" "${select[@]}" --output-on-failure --no-tests=ignore -j "$jobs" \
    --output-junit "$junit" 2>&1 | tee -a "$out/test.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && test_rc=$rc
  counts[$label]=$(junit_counts "$junit")
done

# --- benchmarks ---
: >"$out/bench.log"
bench_failed=()
benches=()
if [ "$build_rc" -eq 0 ] && [ -d "$build_dir/benchmarks" ]; then
  mapfile -t benches < <(find "$build_dir/benchmarks" -maxdepth 1 -type f -executable \
    -name 'bench_*' | sort)
fi
json_dir=$(mktemp -d)
# sinter::dist programs start under MPI: one rank, since NCCL allows one rank per GPU and there is one.
mpirun=()
if command -v mpirun >/dev/null 2>&1; then
  mpirun=(mpirun --allow-run-as-root -np 1)
fi
for bench in "${benches[@]}"; do
  name=$(basename "$bench")
  name=${name#bench_}
  echo "== $name" >>"$out/bench.log"
  if [ "$name" = allreduce ]; then
    if [ ${#mpirun[@]} -eq 0 ]; then
      echo "mpirun not found" >>"$out/bench.log"
      bench_failed+=("$name")
      continue
    fi
    timeout 600 "${mpirun[@]}" "$bench" --summary_out="$json_dir/bench_$name.json" \
      >>"$out/bench.log" 2>&1 || bench_failed+=("$name")
    continue
  fi
  timeout 600 "$bench" --benchmark_format=console --benchmark_color=false \
    --benchmark_out="$json_dir/bench_$name.json" --benchmark_out_format=json \
    >>"$out/bench.log" 2>&1 || bench_failed+=("$name")
done

# The same training steps in PyTorch, from the same run on the same GPU, and the table of ratios.
pytorch_status="skipped (python3 has no CUDA-enabled torch)"
pytorch_rc=0
compare_table=""
if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1
then
  echo "== pytorch_reference" >>"$out/bench.log"
  if timeout 600 python3 benchmarks/pytorch_reference.py --out "$json_dir/pytorch_reference.json" \
      >>"$out/bench.log" 2>&1; then
    pytorch_status="ok"
  else
    pytorch_rc=1
    pytorch_status="FAILED (see bench.log)"
  fi
  compare_table=$(python3 benchmarks/compare.py "$json_dir/bench_train_step.json" \
    "$json_dir/pytorch_reference.json" 2>&1)
  { echo "== compare"; echo "$compare_table"; } >>"$out/bench.log"
fi

# --- the example, data parallel: NCCL initialized through MPI, one epoch of the cnn ---
ddp_status="not run: the build failed"
ddp_rc=0
fmnist_data=/usr/share/datasets/fashion-mnist
if [ "$build_rc" -ne 0 ]; then
  ddp_rc=1
elif [ ! -x "$build_dir/examples/fashion_mnist" ]; then
  ddp_status="skipped: examples/fashion_mnist was not built (CLI11 missing)"
elif [ ${#mpirun[@]} -eq 0 ]; then
  ddp_rc=1
  ddp_status="FAILED: mpirun not found"
elif [ ! -e "$fmnist_data/train-images-idx3-ubyte.gz" ] && [ ! -e "$fmnist_data/train-images-idx3-ubyte" ]; then
  ddp_status="skipped: Fashion-MNIST not found in $fmnist_data"
else
  ddp_out=$(mktemp -d)
  echo "== mpirun -np 1 fashion_mnist --ddp --model cnn --epochs 1 --device cuda" >>"$out/test.log"
  ddp_start=$(date +%s)
  if timeout 600 "${mpirun[@]}" "$build_dir/examples/fashion_mnist" --ddp --model cnn --epochs 1 \
      --device cuda --min-accuracy 0.80 --data "$fmnist_data" --out "$ddp_out" \
      >"$ddp_out/log.txt" 2>&1; then
    ddp_status="ok, $(grep -a -o 'test accuracy: [0-9.]*' "$ddp_out/log.txt" | tail -n 1) in $(( $(date +%s) - ddp_start ))s"
  else
    ddp_rc=1
    ddp_status="FAILED (see test.log)"
  fi
  tr '\r' '\n' <"$ddp_out/log.txt" >>"$out/test.log"
  rm -rf "$ddp_out"
fi

shopt -s nullglob
jsons=("$json_dir"/*.json)
if [ ${#jsons[@]} -le 3 ]; then
  for json in "${jsons[@]}"; do cp "$json" "$out/"; done
elif [ ${#jsons[@]} -gt 0 ]; then
  {
    echo "{"
    sep=""
    for json in "${jsons[@]}"; do
      name=$(basename "$json" .json)
      printf '%s"%s": ' "$sep" "${name#bench_}"
      cat "$json"
      sep=","
    done
    echo "}"
  } >"$out/bench.json"
fi
rm -rf "$json_dir"

# --- summary ---
# The device copy of the tree has no .git: pass SINTER_COMMIT=<hash> to name what was measured.
commit=${SINTER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "unknown")}
if [ -z "${SINTER_COMMIT:-}" ] && [ "$commit" != unknown ] && ! git diff --quiet HEAD 2>/dev/null; then
  commit="$commit + uncommitted changes"
fi
{
  echo "Sinter GPU check  $(date -u '+%Y-%m-%d %H:%M UTC')  commit $commit"
  echo "$device"
  if [ "$build_rc" -eq 0 ]; then echo "build: ok in ${build_s}s"; else echo "build: FAILED (see build.log)"; fi
  printf '%-8s %7s %7s %8s %7s\n' tests passed failed skipped total
  for label in gpu other; do
    read -r total failed skipped <<<"${counts[$label]}"
    printf '%-8s %7d %7d %8d %7d\n' "$label" $(( total - failed - skipped )) "$failed" "$skipped" "$total"
  done
  echo "benchmarks: ${#benches[@]} run, ${#bench_failed[@]} failed${bench_failed:+: ${bench_failed[*]}}"
  # Each benchmark's short table (the markdown lines it prints last: figure, reference, ratio), or
  # without one the result rows of its console table (the lines after its second dashed rule). The
  # PyTorch part of bench.log comes last and is summed up by compare.py's table instead.
  awk 'function flush(  i) {
         if (n_table) { for (i = 1; i <= n_table; i++) print "  " table[i] }
         else { for (i = 1; i <= n_rows; i++) print "  " rows[i] }
         n_table = 0; n_rows = 0
       }
       done {next}
       /^== (pytorch_reference|compare)$/ {flush(); done = 1; next}
       /^== / {flush(); print; rules = 0; next}
       /^\|/ {table[++n_table] = $0; next}
       /^----------/ {rules++; next}
       rules >= 2 && NF {rows[++n_rows] = $0}
       END {if (!done) flush()}' "$out/bench.log"
  echo "ddp example (mpirun -np 1 fashion_mnist --ddp, cnn, 1 epoch): $ddp_status"
  echo "kernel check (scripts/check_kernels.sh):"
  sed 's/^/  /' "$out/kernels.log"
  echo "pytorch reference: $pytorch_status"
  if [ -n "$compare_table" ]; then echo "$compare_table"; fi
  echo "total: $(( $(date +%s) - start ))s"
} | tee "$out/summary.txt"

if [ "$build_rc" -ne 0 ] || [ "$test_rc" -ne 0 ] || [ ${#bench_failed[@]} -ne 0 ] ||
  [ "$pytorch_rc" -ne 0 ] || [ "$kernels_rc" -ne 0 ] || [ "$ddp_rc" -ne 0 ]; then
  exit 1
fi
