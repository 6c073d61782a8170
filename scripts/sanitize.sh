#!/usr/bin/env bash
# The sanitized builds (Note [sanitized builds] in tests/fuzz/README.md), run by CI after the test
# suite: Clang builds with CUDA off, each in its own folder, ccache-backed.
#   scripts/sanitize.sh [asan] [tsan]     (both when none is named)
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer + libFuzzer coverage; the test suite
#         without its e2e training runs, then every fuzz target (SINTER_FUZZ_RUNS inputs each).
#   tsan: ThreadSanitizer; the tests of the data loader, the autograd engine, the CPU kernels'
#         thread pool and the kernels on it (ParallelFor, NumThreads, ParallelElementwise,
#         ParallelKernels, CpuBlockCache), the distributed code (its ranks as threads of one
#         process: DdpLocal, ZeroLocal, GradScaler, ProcessGroupDevice), SummaryWriter's writer
#         thread (Summary) and the profiler (Profiler).
# Environment: SINTER_JOBS (default nproc), SINTER_FUZZ_RUNS (default 20000),
# SINTER_SANITIZE_PREFIX (default build-): the build folders are <prefix>asan and <prefix>tsan.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/exit_time.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
source scripts/lib/deps.sh
SINTER_DEBIAN_PACKAGES+=(clang-19 libclang-rt-19-dev llvm-19)
sinter_install_deps

jobs=${SINTER_JOBS:-$(nproc)}
prefix=${SINTER_SANITIZE_PREFIX:-build-}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(asan tsan)

export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-19/bin/llvm-symbolizer
# allocator_may_return_null: Errors.OutOfHostMemory asks for more memory than exists and expects a
# clear error, not ASan's abort. Open MPI keeps its plugins loaded so that the leak suppressions
# can name them.
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=suppressions=$root/tests/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1
export OMPI_MCA_mca_base_component_disable_dlclose=1

configure() {  # folder, then CMake options
  local dir=$1
  shift
  local generator=()
  [ -f "$dir/CMakeCache.txt" ] || generator=(-G Ninja)
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DSINTER_CUDA=OFF -DSINTER_PYTHON=OFF -DSINTER_BUILD_TESTS=ON -DSINTER_BUILD_BENCHMARKS=OFF "$@"
}

for stage in "${stages[@]}"; do
  stage_start=$(date +%s)
  case $stage in
    asan)
      dir=${prefix}asan
      configure "$dir" -DSINTER_SANITIZE=address,undefined -DSINTER_FUZZ=ON \
        -DSINTER_FUZZ_RUNS="${SINTER_FUZZ_RUNS:-20000}"
      cmake --build "$dir" -j "$jobs"
      ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" -LE 'e2e|gpu' \
        --timeout 900
      ;;
    tsan)
      dir=${prefix}tsan
      # Without oneDNN: its OpenMP runtime's synchronization is invisible to ThreadSanitizer.
      configure "$dir" -DSINTER_SANITIZE=thread -DSINTER_BUILD_EXAMPLES=OFF -DSINTER_DNNL=OFF
      cmake --build "$dir" -j "$jobs" --target sinter_tests
      ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" --timeout 900 \
        -R '^(DataLoader|DistributedSampler|Autograd|DetectAnomaly|DdpLocal|ZeroLocal|ProcessGroupDevice|GradScaler|ParallelFor|NumThreads|ParallelElementwise|ParallelKernels|CpuBlockCache|Summary|Profiler)\.'
      ;;
    *)
      echo "scripts/sanitize.sh: unknown stage '$stage' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "scripts/sanitize.sh: $stage took $(( $(date +%s) - stage_start ))s"
done
